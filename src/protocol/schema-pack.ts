// The schema pack (docs/schema-pack.md): JSON Schemas for the arguments of each MCP tool,
// enforced by the tower's /mcp/call and, before any HTTP request, by svcd. One format, one
// parser and one compiler for both; reading the file (SVC_SCHEMA_PACK_FILE) is the caller's.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type AjvModule from 'ajv';
import type addFormatsModule from 'ajv-formats';
import { SvcError } from './errors.js';
import { fieldErrors } from './field-errors.js';
import { isMcpToolName, MCP_TOOL_ARGS, MCP_TOOLS, type McpToolName } from './mcp-tools.js';

/**
 * A new Ajv with the formats. ajv and ajv-formats are CommonJS (default exports), required on
 * first use: svcd compiles the embedded pack only at its first MCP call, and an idle svcd does
 * not carry them (docs/perf-notes.md, daemon).
 */
function newAjv(): AjvModule.default {
  const require = createRequire(import.meta.url);
  let ajvModule: typeof AjvModule;
  let formatsModule: typeof addFormatsModule;
  try {
    ajvModule = require('ajv') as typeof AjvModule;
    formatsModule = require('ajv-formats') as typeof addFormatsModule;
  } catch (e) {
    throw new SvcError('internal', `cannot load the schema pack validator (ajv): ${(e as Error).message}`);
  }
  const Ajv = ajvModule.default ?? ajvModule;
  const addFormats = formatsModule.default ?? formatsModule;
  // Strict like request bodies: no coercion, unknown fields are errors (per the schema).
  const ajv = new Ajv({ coerceTypes: false, useDefaults: true, removeAdditional: false, strict: false });
  addFormats(ajv);
  return ajv;
}

export interface SchemaPack {
  /** The file it came from, or "embedded". */
  source: string;
  /** Argument schema of every tool: the file's where it names the tool, else the default. */
  tools: Record<McpToolName, object>;
  /** Tools whose schema came from the file. */
  overridden: McpToolName[];
}

const TOP_LEVEL_KEYS = new Set(['tools', 'description', '$schema']);

export function embeddedSchemaPack(): SchemaPack {
  return { source: 'embedded', tools: { ...MCP_TOOL_ARGS }, overridden: [] };
}

/**
 * Parses a pack file's text: `{"tools": {"<tool>": <JSON Schema>}, "description"?: "…"}`.
 * Throws an Error saying what is wrong (and where) when the text is not a valid pack; the
 * schemas themselves are checked by compileSchemaPack.
 */
export function parseSchemaPack(text: string, source: string): SchemaPack {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new Error(`schema pack ${source}: not JSON (${(e as Error).message})`);
  }
  if (!isObject(parsed)) throw new Error(`schema pack ${source}: expected an object {"tools": {…}}`);
  for (const key of Object.keys(parsed)) {
    if (!TOP_LEVEL_KEYS.has(key)) {
      throw new Error(
        `schema pack ${source}: unknown top-level field "${key}" (expected "tools", "description")`,
      );
    }
  }
  const tools = parsed.tools;
  if (!isObject(tools))
    throw new Error(`schema pack ${source}: "tools" must be an object {"<tool>": <JSON Schema>}`);
  const pack = embeddedSchemaPack();
  pack.source = source;
  for (const [name, schema] of Object.entries(tools)) {
    if (!isMcpToolName(name)) {
      throw new Error(
        `schema pack ${source}: unknown tool "${name}" (one of ${Object.keys(MCP_TOOLS).join(', ')})`,
      );
    }
    if (!isObject(schema) && typeof schema !== 'boolean') {
      throw new Error(`schema pack ${source}: tools.${name} must be a JSON Schema (object or boolean)`);
    }
    pack.tools[name] = schema as object;
    pack.overridden.push(name);
  }
  return pack;
}

type Validator = ((x: unknown) => boolean) & { errors?: unknown[] | null };

/** A compiled pack: check() throws the SvcError a caller of /mcp/call gets. */
export interface CompiledSchemaPack {
  readonly source: string;
  readonly pack: SchemaPack;
  /** Throws not_found for an unknown tool, validation_failed naming each bad argument. */
  check(tool: string, args: unknown): asserts tool is McpToolName;
}

/** Compiles every schema of the pack with Ajv; throws naming the tool whose schema is invalid. */
export function compileSchemaPack(pack: SchemaPack): CompiledSchemaPack {
  const ajv = newAjv();
  const validators = new Map<string, Validator>();
  for (const [name, schema] of Object.entries(pack.tools)) {
    try {
      validators.set(name, ajv.compile(schema) as Validator);
    } catch (e) {
      throw new Error(`schema pack ${pack.source}: tools.${name}: ${(e as Error).message}`);
    }
  }
  return {
    source: pack.source,
    pack,
    check(tool, args): asserts tool is McpToolName {
      const validate = validators.get(tool);
      if (!validate) {
        throw new SvcError(
          'not_found',
          `unknown tool "${tool}": one of ${[...validators.keys()].join(', ')}`,
        );
      }
      if (!validate(args)) {
        const errors = fieldErrors('args', (validate.errors ?? []) as never[]);
        throw new SvcError(
          'validation_failed',
          `${tool}: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`,
          {
            errors,
          },
        );
      }
    },
  };
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

export interface LoadedSchemaPack {
  pack: CompiledSchemaPack;
  /** Why the file was not used, or null. */
  error: string | null;
}

/**
 * The pack a process enforces: `file` (SVC_SCHEMA_PACK_FILE) if set and valid, else the
 * embedded defaults. An unreadable or invalid file does not stop the tower or svcd: they log
 * why and enforce the defaults (the checks every tower makes), and report the error.
 */
export async function loadSchemaPack(
  file: string | undefined,
  log: { info(o: object, msg: string): void; error(o: object, msg: string): void },
): Promise<LoadedSchemaPack> {
  if (!file) return { pack: compiledOnFirstCheck(embeddedSchemaPack()), error: null };
  try {
    const pack = compileSchemaPack(parseSchemaPack(await readFile(file, 'utf8'), file));
    log.info({ file, overridden: pack.pack.overridden }, 'schema pack loaded');
    return { pack, error: null };
  } catch (e) {
    const message = (e as Error).message;
    const error = message.startsWith('schema pack') ? message : `schema pack ${file}: ${message}`;
    log.error({ file, error }, 'invalid schema pack; using the embedded defaults');
    return { pack: compiledOnFirstCheck(embeddedSchemaPack()), error };
  }
}

/**
 * The embedded pack, compiled at its first check rather than at start (its schemas are ours and
 * compile: schema-pack.test.ts). A file's pack is compiled at once, so a bad one is reported at
 * start.
 */
function compiledOnFirstCheck(pack: SchemaPack): CompiledSchemaPack {
  let compiled: CompiledSchemaPack | null = null;
  return {
    source: pack.source,
    pack,
    check(tool, args): asserts tool is McpToolName {
      const c: CompiledSchemaPack = compiled ?? compileSchemaPack(pack);
      compiled = c;
      c.check(tool, args);
    },
  };
}
