// Ajv errors → field errors that name the field ("body/title: must be string"). Shared by the
// tower's route validation, svcd's mgmt.sock params and the schema pack both enforce.
import type { FieldError } from './errors.js';

export interface AjvErrorLike {
  instancePath?: string;
  schemaPath?: string;
  keyword?: string;
  params?: Record<string, unknown>;
  message?: string;
}

/**
 * A union of constants (`Type.Union([Type.Literal('a'), …])`, how the protocol spells its
 * enumerations) fails in Ajv as one `const` error per branch ("must be equal to constant",
 * naming one value each), then the `anyOf` error. Those become one error listing every valid
 * value, as an `enum` error would; other errors pass through unchanged.
 */
export function collapseConstUnions<E extends AjvErrorLike>(errors: readonly E[]): E[] {
  const out: E[] = [];
  for (let i = 0; i < errors.length; i++) {
    const e = errors[i] as E;
    const anyOfPath = branchOf(e);
    if (anyOfPath === null) {
      out.push(e);
      continue;
    }
    // The branch errors of this anyOf, then the anyOf error itself.
    let j = i;
    const allowed: unknown[] = [];
    let onlyConsts = true;
    while (j < errors.length && branchOf(errors[j] as E) === anyOfPath) {
      const b = errors[j] as E;
      if (b.keyword === 'const') allowed.push(b.params?.allowedValue);
      else if (b.keyword !== 'type') onlyConsts = false;
      j++;
    }
    const closing = errors[j];
    if (
      !onlyConsts ||
      allowed.length === 0 ||
      closing?.keyword !== 'anyOf' ||
      closing.schemaPath !== anyOfPath
    ) {
      out.push(e);
      continue;
    }
    out.push({
      ...closing,
      keyword: 'enum',
      params: { allowedValues: allowed },
      message: `must be one of ${JSON.stringify(allowed)}`,
    });
    i = j;
  }
  return out;
}

/** The schema path of the anyOf whose branch failed with `e`, or null. */
function branchOf(e: AjvErrorLike): string | null {
  const m = /^(.*\/anyOf)\/\d+\/[^/]+$/.exec(e.schemaPath ?? '');
  return m?.[1] ?? null;
}

export function fieldErrors(context: string, errors: readonly AjvErrorLike[]): FieldError[] {
  return collapseConstUnions(errors).map((e) => {
    let path = (e.instancePath ?? '').replace(/^\//, '');
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'additionalProperties' && typeof e.params?.additionalProperty === 'string') {
      path = join(path, e.params.additionalProperty);
      message = 'unknown field';
    } else if (e.keyword === 'required' && typeof e.params?.missingProperty === 'string') {
      path = join(path, e.params.missingProperty);
      message = 'is required';
    } else if (e.keyword === 'enum') {
      message = `must be one of ${JSON.stringify(e.params?.allowedValues)}`;
    }
    return { field: path ? `${context}/${path}` : context, message };
  });
}

function join(a: string, b: string): string {
  return a ? `${a}/${b}` : b;
}
