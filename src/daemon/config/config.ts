// config.toml ($SVC_HOME/svcd/config.toml): parsed in one place into a typed SvcdConfig.
// Each top-level table is a section with its own parser; an area adds its section with one
// line in CONFIG_SECTIONS (its parser lives in its own folder). Unknown tables and keys are
// errors naming the file, the line and the field. A missing file means all defaults.

import { fanoutSection } from '../fanout/config-section.js';
import { workerSection } from '../worker/config-section.js';
import { runtimeSection } from './runtime-section.js';
import type { ConfigSection } from './section.js';
import { supervisorSection, watchdogSection } from './supervisor-section.js';
import { readTomlFile, rootReader, type TomlDoc } from './toml.js';

/** Every table config.toml may have. Areas append theirs: `worker: workerSection,`. */
export const CONFIG_SECTIONS = {
  runtime: runtimeSection,
  supervisor: supervisorSection,
  watchdog: watchdogSection,
  worker: workerSection,
  fanout: fanoutSection,
} satisfies Record<string, ConfigSection<unknown>>;

type Sections = typeof CONFIG_SECTIONS;
export type SvcdConfig = { [K in keyof Sections]: ReturnType<Sections[K]['parse']> };

/** Parses a config document; throws config_invalid with file, line and field. */
export function parseSvcdConfig(doc: TomlDoc): SvcdConfig {
  const root = rootReader(doc);
  const names = Object.keys(CONFIG_SECTIONS);
  for (const [key, value] of Object.entries(doc.data)) {
    if (!names.includes(key)) throw root.error(key, `unknown table (known: ${names.join(', ')})`);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw root.error(key, `must be a table ([${key}])`);
    }
  }
  const out: Record<string, unknown> = {};
  for (const [name, section] of Object.entries(CONFIG_SECTIONS) as [string, ConfigSection<unknown>][]) {
    out[name] = section.parse(root.subtable(name));
  }
  return out as SvcdConfig;
}

/** The configuration with every default (what a missing config.toml means). */
export function defaultSvcdConfig(): SvcdConfig {
  const out: Record<string, unknown> = {};
  for (const [name, section] of Object.entries(CONFIG_SECTIONS) as [string, ConfigSection<unknown>][]) {
    out[name] = section.parse(undefined);
  }
  return out as SvcdConfig;
}

/** Reads $SVC_HOME/svcd/config.toml (absent: defaults). */
export async function loadSvcdConfig(file: string): Promise<SvcdConfig> {
  const doc = await readTomlFile(file);
  if (doc === 'missing') return defaultSvcdConfig();
  return parseSvcdConfig(doc);
}
