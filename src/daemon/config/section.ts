// A config file made of sections: each top-level table has its own parser, and the owner hands
// in the table of them (svcd-config.ts). Unknown tables are errors naming file, line and table.
// A leaf: the sections live in their areas.
import { readTomlFile, rootReader, type TableReader, type TomlDoc } from './toml.js';

export interface ConfigSection<T> {
  /** `table` is undefined when the file has no such table: return the defaults. */
  parse(table: TableReader | undefined): T;
}

export type ConfigSections = Record<string, ConfigSection<unknown>>;

/** The typed settings of a table of sections: one field per section. */
export type ConfigOf<S extends ConfigSections> = { [K in keyof S]: ReturnType<S[K]['parse']> };

/** Parses a config document; throws config_invalid with file, line and field. */
export function parseSections<S extends ConfigSections>(doc: TomlDoc, sections: S): ConfigOf<S> {
  const root = rootReader(doc);
  const names = Object.keys(sections);
  for (const [key, value] of Object.entries(doc.data)) {
    if (!names.includes(key)) throw root.error(key, `unknown table (known: ${names.join(', ')})`);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw root.error(key, `must be a table ([${key}])`);
    }
  }
  const out: Record<string, unknown> = {};
  for (const [name, section] of Object.entries(sections)) out[name] = section.parse(root.subtable(name));
  return out as ConfigOf<S>;
}

/** Every section's defaults (what a missing file means). */
export function sectionDefaults<S extends ConfigSections>(sections: S): ConfigOf<S> {
  const out: Record<string, unknown> = {};
  for (const [name, section] of Object.entries(sections)) out[name] = section.parse(undefined);
  return out as ConfigOf<S>;
}

/** Reads and parses `file` (absent: every default). */
export async function loadSections<S extends ConfigSections>(
  file: string,
  sections: S,
): Promise<ConfigOf<S>> {
  const doc = await readTomlFile(file);
  if (doc === 'missing') return sectionDefaults(sections);
  return parseSections(doc, sections);
}
