// What a table of config.toml is to config.ts: a parser from the table (or its absence) to
// typed settings. A leaf, so each area's section parser can live in the area's folder.
import type { TableReader } from './toml.js';

export interface ConfigSection<T> {
  /** `table` is undefined when the file has no such table: return the defaults. */
  parse(table: TableReader | undefined): T;
}
