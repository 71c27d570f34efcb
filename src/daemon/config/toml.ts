// TOML files of svcd (config.toml, agents.toml, and any other area's file): parsing with
// smol-toml plus a line locator, so every error names the file, the line and the field.
// Typed field readers live here too; the rest of the code never sees raw TOML.
import { readFile } from 'node:fs/promises';
import { parse, TomlError } from 'smol-toml';
import { parseDuration } from '../../lib/duration.js';
import { SvcError } from '../../protocol/errors.js';

export type TomlPath = readonly (string | number)[];
export type TomlTable = Record<string, unknown>;

export interface TomlDoc {
  file: string;
  data: TomlTable;
  /** Line (1-based) where the value at path (or its nearest located ancestor) is written. */
  lineOf(path: TomlPath): number | undefined;
}

/** "agent[1].env.HOME" */
export function fieldName(path: TomlPath): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? seg : `.${seg}`;
  }
  return out;
}

/** The one error shape of config files: "file:line: field: message", code config_invalid. */
export function configError(
  doc: Pick<TomlDoc, 'file' | 'lineOf'>,
  path: TomlPath,
  message: string,
): SvcError {
  const line = doc.lineOf(path);
  const field = fieldName(path);
  const where = line === undefined ? doc.file : `${doc.file}:${line}`;
  return new SvcError('config_invalid', `${where}: ${field ? `${field}: ` : ''}${message}`, {
    errors: [{ field: field || '(file)', message }],
  });
}

/** Parses TOML text; a syntax error becomes config_invalid naming file, line and column. */
export function parseTomlText(file: string, text: string): TomlDoc {
  let data: TomlTable;
  try {
    data = parse(text) as TomlTable;
  } catch (e) {
    if (e instanceof TomlError) {
      const first = (e.message.split('\n')[0] ?? 'syntax error').replace(/^Invalid TOML document: /, '');
      throw new SvcError('config_invalid', `${file}:${e.line}:${e.column}: syntax error: ${first}`, {
        errors: [{ field: '(syntax)', message: first }],
      });
    }
    throw e;
  }
  const lines = locateKeys(text);
  return {
    file,
    data,
    lineOf(path) {
      for (let n = path.length; n >= 0; n--) {
        const line = lines.get(pathKey(path.slice(0, n)));
        if (line !== undefined) return line;
      }
      return undefined;
    },
  };
}

/** Reads and parses a TOML file; a missing file is `missing` (callers decide if that is fine). */
export async function readTomlFile(file: string): Promise<TomlDoc | 'missing'> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw new SvcError('config_invalid', `${file}: cannot read: ${(e as Error).message}`);
  }
  return parseTomlText(file, text);
}

// ---- line locator -------------------------------------------------------------------------

function pathKey(path: TomlPath): string {
  return JSON.stringify(path);
}

/**
 * Maps every table header and key assignment to its line. A small scanner, not a parser:
 * it follows [table] and [[array]] headers (with their running index) and `key =` lines,
 * skipping the bodies of multi-line strings. Keys inside inline tables resolve to the
 * line of the inline table itself, which is where the error is to be found anyway.
 */
function locateKeys(text: string): Map<string, number> {
  const found = new Map<string, number>();
  const arrayIndex = new Map<string, number>();
  let current: (string | number)[] = [];
  let inMultiline: '"""' | "'''" | null = null;
  const src = text.split(/\r?\n/);
  for (let i = 0; i < src.length; i++) {
    const raw = src[i] ?? '';
    const lineNo = i + 1;
    if (inMultiline) {
      if (raw.includes(inMultiline)) inMultiline = null;
      continue;
    }
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('[')) {
      const isArray = line.startsWith('[[');
      const segs = readKey(line.slice(isArray ? 2 : 1));
      if (!segs) continue;
      // Resolve earlier arrays of tables on the way ([agent.env] after [[agent]]).
      const resolved: (string | number)[] = [];
      for (const seg of segs.keys) {
        resolved.push(seg);
        const idx = arrayIndex.get(pathKey(resolved));
        if (idx !== undefined && !(isArray && resolved.length === segs.keys.length)) resolved.push(idx);
      }
      if (isArray) {
        const k = pathKey(resolved);
        const idx = (arrayIndex.get(k) ?? -1) + 1;
        arrayIndex.set(k, idx);
        if (!found.has(k)) found.set(k, lineNo);
        resolved.push(idx);
      }
      current = resolved;
      if (!found.has(pathKey(current))) found.set(pathKey(current), lineNo);
      continue;
    }
    const key = readKey(line);
    if (key?.rest[0] !== '=') continue;
    const full = [...current, ...key.keys];
    if (!found.has(pathKey(full))) found.set(pathKey(full), lineNo);
    const value = key.rest.slice(1);
    for (const q of ['"""', "'''"] as const) {
      const at = value.indexOf(q);
      if (at >= 0 && value.indexOf(q, at + 3) < 0) inMultiline = q;
    }
  }
  return found;
}

/** Reads a dotted key (bare or quoted segments); returns the segments and the rest of the line. */
function readKey(s: string): { keys: string[]; rest: string } | null {
  const keys: string[] = [];
  let i = 0;
  for (;;) {
    while (s[i] === ' ' || s[i] === '\t') i++;
    const c = s[i];
    if (c === '"' || c === "'") {
      const end = s.indexOf(c, i + 1);
      if (end < 0) return null;
      keys.push(s.slice(i + 1, end));
      i = end + 1;
    } else {
      const m = /^[A-Za-z0-9_-]+/.exec(s.slice(i));
      if (!m) return null;
      keys.push(m[0]);
      i += m[0].length;
    }
    while (s[i] === ' ' || s[i] === '\t') i++;
    if (s[i] === '.') {
      i++;
      continue;
    }
    return { keys, rest: s.slice(i) };
  }
}

// ---- typed readers ------------------------------------------------------------------------

/** A table being read: its document, its path, its keys. Readers throw configError. */
export class TableReader {
  constructor(
    readonly doc: TomlDoc,
    readonly path: TomlPath,
    readonly table: TomlTable,
  ) {}

  /** Rejects keys not in `allowed`, naming the first unknown one and what is allowed. */
  onlyKeys(allowed: readonly string[]): this {
    for (const k of Object.keys(this.table)) {
      if (!allowed.includes(k)) {
        throw configError(this.doc, [...this.path, k], `unknown field (allowed: ${allowed.join(', ')})`);
      }
    }
    return this;
  }

  has(key: string): boolean {
    return this.table[key] !== undefined;
  }

  error(key: string | null, message: string): SvcError {
    return configError(this.doc, key === null ? this.path : [...this.path, key], message);
  }

  string(key: string): string | undefined {
    const v = this.table[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw this.error(key, `must be a string, got ${typeName(v)}`);
    return v;
  }

  requiredString(key: string): string {
    const v = this.string(key);
    if (v === undefined) throw this.error(key, 'is required');
    return v;
  }

  boolean(key: string): boolean | undefined {
    const v = this.table[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') throw this.error(key, `must be true or false, got ${typeName(v)}`);
    return v;
  }

  integer(key: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
    const v = this.table[key];
    if (v === undefined) return undefined;
    const n = typeof v === 'bigint' ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isInteger(n))
      throw this.error(key, `must be an integer, got ${typeName(v)}`);
    if (n < min || n > max) throw this.error(key, `must be between ${min} and ${max}, got ${n}`);
    return n;
  }

  /** A duration string such as "90s", "30m", "1h30m", in milliseconds. */
  duration(key: string): number | undefined {
    const v = this.string(key);
    if (v === undefined) return undefined;
    try {
      return parseDuration(v);
    } catch (e) {
      throw this.error(key, (e as Error).message);
    }
  }

  oneOf<T extends string>(key: string, values: readonly T[]): T | undefined {
    const v = this.string(key);
    if (v === undefined) return undefined;
    if (!(values as readonly string[]).includes(v)) {
      throw this.error(key, `must be one of ${values.join(', ')}, got "${v}"`);
    }
    return v as T;
  }

  stringArray(key: string, opts: { nonEmpty?: boolean } = {}): string[] | undefined {
    const v = this.table[key];
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) throw this.error(key, `must be an array of strings, got ${typeName(v)}`);
    if (opts.nonEmpty && v.length === 0) throw this.error(key, 'must not be empty');
    v.forEach((item, i) => {
      if (typeof item !== 'string') {
        throw configError(this.doc, [...this.path, key, i], `must be a string, got ${typeName(item)}`);
      }
    });
    return v as string[];
  }

  /** A table of string values (env = { KEY = "value" }). */
  stringMap(key: string): Record<string, string> | undefined {
    const v = this.table[key];
    if (v === undefined) return undefined;
    if (!isTable(v)) throw this.error(key, `must be a table of strings, got ${typeName(v)}`);
    const out: Record<string, string> = {};
    for (const [k, item] of Object.entries(v)) {
      if (typeof item !== 'string') {
        throw configError(this.doc, [...this.path, key, k], `must be a string, got ${typeName(item)}`);
      }
      out[k] = item;
    }
    return out;
  }

  /** A sub-table as a reader (undefined when absent). */
  subtable(key: string): TableReader | undefined {
    const v = this.table[key];
    if (v === undefined) return undefined;
    if (!isTable(v)) throw this.error(key, `must be a table, got ${typeName(v)}`);
    return new TableReader(this.doc, [...this.path, key], v);
  }

  /** An array of tables ([[key]]) as readers. */
  tables(key: string): TableReader[] {
    const v = this.table[key];
    if (v === undefined) return [];
    if (!Array.isArray(v))
      throw this.error(key, `must be an array of tables ([[${key}]]), got ${typeName(v)}`);
    return v.map((item, i) => {
      if (!isTable(item)) {
        throw configError(this.doc, [...this.path, key, i], `must be a table, got ${typeName(item)}`);
      }
      return new TableReader(this.doc, [...this.path, key, i], item);
    });
  }
}

export function rootReader(doc: TomlDoc): TableReader {
  return new TableReader(doc, [], doc.data);
}

export function isTable(v: unknown): v is TomlTable {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

function typeName(v: unknown): string {
  if (Array.isArray(v)) return 'an array';
  if (v instanceof Date) return 'a date';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'a table';
  if (typeof v === 'string') return `"${v.length > 40 ? `${v.slice(0, 40)}…` : v}"`;
  return `${typeof v} ${String(v)}`;
}
