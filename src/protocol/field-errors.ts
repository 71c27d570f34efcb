// Ajv errors → field errors that name the field ("body/title: must be string"). Shared by the
// tower's route validation and the schema pack both the tower and svcd enforce.
import type { FieldError } from './errors.js';

export interface AjvErrorLike {
  instancePath?: string;
  keyword?: string;
  params?: Record<string, unknown>;
  message?: string;
}

export function fieldErrors(context: string, errors: readonly AjvErrorLike[]): FieldError[] {
  return errors.map((e) => {
    let path = (e.instancePath ?? '').replace(/^\//, '');
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'additionalProperties' && typeof e.params?.additionalProperty === 'string') {
      path = join(path, e.params.additionalProperty);
      message = 'unknown field';
    } else if (e.keyword === 'required' && typeof e.params?.missingProperty === 'string') {
      path = join(path, e.params.missingProperty);
      message = 'is required';
    } else if (e.keyword === 'enum' || e.keyword === 'anyOf') {
      message = e.keyword === 'enum' ? `must be one of ${JSON.stringify(e.params?.allowedValues)}` : message;
    }
    return { field: path ? `${context}/${path}` : context, message };
  });
}

function join(a: string, b: string): string {
  return a ? `${a}/${b}` : b;
}
