// A validator for the JSON Schema subset that ./type.ts builds, for the places that decode
// socket messages where Ajv may not be loaded: svcd's control channel and mgmt.sock envelope
// (an idle svcd keeps Ajv out of memory, BENCHMARKS.md "daemon"). It answers exactly as Ajv
// does for these schemas (check.test.ts compares them on arbitrary values); a schema using a
// keyword it does not know is refused when it is compiled, never silently accepted.
import type { TSchema } from './type.js';

type Schema = Record<string, unknown>;
/** Null when `value` is valid, else the path of the first invalid part and why. */
export type Checker = (value: unknown) => { path: string; message: string } | null;

const KNOWN = new Set([
  'type',
  'const',
  'anyOf',
  'properties',
  'required',
  'additionalProperties',
  'patternProperties',
  'items',
  'minItems',
  'maxItems',
  'uniqueItems',
  'minLength',
  'maxLength',
  'pattern',
  'minimum',
  'maximum',
  // Annotations: no effect on validity.
  'description',
  'title',
  'default',
  'examples',
]);

type Fail = { path: string; message: string };
type Check = (v: unknown, path: string) => Fail | null;

function typeOk(type: string, v: unknown): boolean {
  switch (type) {
    case 'string':
      return typeof v === 'string';
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'boolean':
      return typeof v === 'boolean';
    case 'null':
      return v === null;
    case 'array':
      return Array.isArray(v);
    case 'object':
      return typeof v === 'object' && v !== null && !Array.isArray(v);
    default:
      throw new Error(`check: unsupported type ${type}`);
  }
}

/** Length in code points, as Ajv counts it. */
function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    n++;
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
  }
  return n;
}

/** Deep equality of JSON values, for uniqueItems. */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && jsonEqual((a as Schema)[k], (b as Schema)[k]));
}

function build(s: Schema): Check {
  for (const k of Object.keys(s)) if (!KNOWN.has(k)) throw new Error(`check: unsupported keyword ${k}`);
  const checks: Check[] = [];
  const fail = (path: string, message: string): Fail => ({ path, message });
  if (s.type !== undefined) {
    const type = s.type as string;
    typeOk(type, null); // refuses unknown types at compile time
    checks.push((v, p) => (typeOk(type, v) ? null : fail(p, `must be ${type}`)));
  }
  if (s.const !== undefined) {
    const c = s.const;
    checks.push((v, p) => (jsonEqual(v, c) ? null : fail(p, `must be ${JSON.stringify(c)}`)));
  }
  if (s.anyOf !== undefined) {
    const alts = (s.anyOf as Schema[]).map(build);
    checks.push((v, p) =>
      alts.some((a) => a(v, p) === null) ? null : fail(p, 'must match a schema in anyOf'),
    );
  }
  const isObj = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (s.required !== undefined) {
    const req = s.required as string[];
    checks.push((v, p) => {
      if (!isObj(v)) return null;
      const missing = req.find((k) => !Object.hasOwn(v, k));
      return missing === undefined ? null : fail(p, `must have required property '${missing}'`);
    });
  }
  const props = s.properties ? Object.entries(s.properties as Record<string, Schema>) : [];
  const propChecks = new Map(props.map(([k, sub]) => [k, build(sub)]));
  const patterns = s.patternProperties
    ? Object.entries(s.patternProperties as Record<string, Schema>).map(
        ([re, sub]) => [new RegExp(re, 'u'), build(sub)] as const,
      )
    : [];
  const closed = s.additionalProperties === false;
  if (
    s.additionalProperties !== undefined &&
    s.additionalProperties !== false &&
    s.additionalProperties !== true
  )
    throw new Error('check: additionalProperties must be a boolean');
  if (propChecks.size > 0 || patterns.length > 0 || closed) {
    checks.push((v, p) => {
      if (!isObj(v)) return null;
      for (const k of Object.keys(v)) {
        const own = propChecks.get(k);
        const sub = `${p}/${k}`;
        let matched = own !== undefined;
        if (own) {
          const f = own(v[k], sub);
          if (f) return f;
        }
        for (const [re, check] of patterns) {
          if (!re.test(k)) continue;
          matched = true;
          const f = check(v[k], sub);
          if (f) return f;
        }
        if (!matched && closed) return fail(p, `must NOT have additional property '${k}'`);
      }
      return null;
    });
  }
  if (s.items !== undefined) {
    const item = build(s.items as Schema);
    checks.push((v, p) => {
      if (!Array.isArray(v)) return null;
      for (let i = 0; i < v.length; i++) {
        const f = item(v[i], `${p}/${i}`);
        if (f) return f;
      }
      return null;
    });
  }
  const minItems = s.minItems as number | undefined;
  const maxItems = s.maxItems as number | undefined;
  if (minItems !== undefined || maxItems !== undefined || s.uniqueItems === true) {
    const unique = s.uniqueItems === true;
    checks.push((v, p) => {
      if (!Array.isArray(v)) return null;
      if (minItems !== undefined && v.length < minItems)
        return fail(p, `must NOT have fewer than ${minItems} items`);
      if (maxItems !== undefined && v.length > maxItems)
        return fail(p, `must NOT have more than ${maxItems} items`);
      if (unique)
        for (let i = 0; i < v.length; i++)
          for (let j = i + 1; j < v.length; j++)
            if (jsonEqual(v[i], v[j])) return fail(p, 'must NOT have duplicate items');
      return null;
    });
  }
  const minLength = s.minLength as number | undefined;
  const maxLength = s.maxLength as number | undefined;
  const pattern = s.pattern === undefined ? null : new RegExp(s.pattern as string, 'u');
  if (minLength !== undefined || maxLength !== undefined || pattern) {
    checks.push((v, p) => {
      if (typeof v !== 'string') return null;
      if (minLength !== undefined || maxLength !== undefined) {
        const n = codePoints(v);
        if (minLength !== undefined && n < minLength)
          return fail(p, `must NOT have fewer than ${minLength} characters`);
        if (maxLength !== undefined && n > maxLength)
          return fail(p, `must NOT have more than ${maxLength} characters`);
      }
      if (pattern && !pattern.test(v)) return fail(p, `must match pattern "${s.pattern as string}"`);
      return null;
    });
  }
  const minimum = s.minimum as number | undefined;
  const maximum = s.maximum as number | undefined;
  if (minimum !== undefined || maximum !== undefined) {
    checks.push((v, p) => {
      if (typeof v !== 'number') return null;
      if (minimum !== undefined && v < minimum) return fail(p, `must be >= ${minimum}`);
      if (maximum !== undefined && v > maximum) return fail(p, `must be <= ${maximum}`);
      return null;
    });
  }
  return (v, p) => {
    for (const c of checks) {
      const f = c(v, p);
      if (f) return f;
    }
    return null;
  };
}

/** Compiles a schema built by ./type.ts; throws on keywords outside the subset. */
export function compileCheck(schema: TSchema): Checker {
  const check = build(schema as unknown as Schema);
  return (value) => check(value, '');
}
