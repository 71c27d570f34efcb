// svcd's schema pack: SVC_SCHEMA_PACK_FILE compiled with Ajv at start. Unlike the tower, an
// invalid pack does not stop svcd: it logs why and enforces the embedded defaults, and
// daemon.status shows the error, so agents keep working with the checks every tower makes.
import { readFile } from 'node:fs/promises';
import type { Logger } from '../../lib/log.js';
import {
  type CompiledSchemaPack,
  compileSchemaPack,
  embeddedSchemaPack,
  parseSchemaPack,
} from '../../protocol/schema-pack.js';

export interface LoadedSchemaPack {
  pack: CompiledSchemaPack;
  /** Why SVC_SCHEMA_PACK_FILE was not used, or null. */
  error: string | null;
}

export async function loadSchemaPack(file: string | undefined, log: Logger): Promise<LoadedSchemaPack> {
  if (!file) return { pack: compileSchemaPack(embeddedSchemaPack()), error: null };
  try {
    const pack = compileSchemaPack(parseSchemaPack(await readFile(file, 'utf8'), file));
    log.info({ file, overridden: pack.pack.overridden }, 'schema pack loaded');
    return { pack, error: null };
  } catch (e) {
    const error = (e as Error).message.startsWith('schema pack')
      ? (e as Error).message
      : `schema pack ${file}: ${(e as Error).message}`;
    log.error({ file, error }, 'invalid schema pack; using the embedded defaults');
    return { pack: compileSchemaPack(embeddedSchemaPack()), error };
  }
}
