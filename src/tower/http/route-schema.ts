// What a tower route declares in its `schema`: its request parts, its success responses and the
// problem+json answers it can give, grouped by status. Fastify validates requests and
// serializes responses with it; http/openapi.ts publishes every route's schema as /openapi.json.
// Route tables per area (e.g. feed/schemas.ts) are built with `route()`.
import { type TSchema, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ERROR_CODES, type ErrorCode, type Problem, ProblemSchema } from '../../protocol/errors.js';

/** The $id of the shared problem schema (components/schemas/Problem in the document). */
export const PROBLEM_ID = 'Problem';
const PROBLEM_TYPE = 'application/problem+json';

/** Adds the schemas routes refer to by $ref; before any route is registered. */
export function addSharedSchemas(app: FastifyInstance): void {
  app.addSchema({ ...ProblemSchema, $id: PROBLEM_ID });
}

const ProblemRef = Type.Unsafe<Problem>({ $ref: `${PROBLEM_ID}#` });

export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 422 | 429 | 500 | 503;
export interface ProblemResponse {
  description: string;
  content: { 'application/problem+json': { schema: typeof ProblemRef } };
}
export type ErrorResponses = { [S in ErrorStatus]?: ProblemResponse };

/** `schema` with a description (what the document says of a response or parameter). */
export const described = <T extends TSchema>(schema: T, description: string): T => ({
  ...schema,
  description,
});

/** A response without a body (204, 304, 101): `type: null` is what the document reads as "no content". */
export const noContent = (description: string) => Type.Unsafe<undefined>({ type: 'null', description });

/** A response whose body is not JSON. */
export const media = (type: string, description: string) => ({
  description,
  content: { [type]: { schema: Type.String() } },
});

export interface RouteDoc {
  summary: string;
  tags: string[];
  description?: string;
  params?: TSchema;
  querystring?: TSchema;
  body?: TSchema;
  /** Success answers by status. */
  response: Record<number, unknown>;
  /** Error codes this route answers besides the ones every route may (see `commonErrors`). */
  errors?: ErrorCode[];
  /** The route needs no credential (config scope 'public'): no 401/403/429. */
  public?: boolean;
  /** The route writes to the store: it may answer the store's write faults (503). */
  writes?: boolean;
}

const WRITE_FAULTS: ErrorCode[] = ['storage_full', 'storage_read_only', 'storage_busy', 'storage_io_error'];

/** The codes a route may answer whatever it does (auth hook, text rule, body parser, faults). */
export function commonErrors(d: Pick<RouteDoc, 'public' | 'body' | 'writes'>): ErrorCode[] {
  const codes: ErrorCode[] = ['validation_failed'];
  if (d.body) codes.push('invalid_json', 'bad_request', 'payload_too_large', 'unsupported_media_type');
  if (!d.public) codes.push('unauthenticated', 'forbidden', 'rate_limited');
  codes.push('internal', 'unavailable');
  if (d.writes) codes.push(...WRITE_FAULTS);
  return codes;
}

/** The problem responses of `codes`, one per status, each naming its codes. */
export function errorResponses(codes: readonly ErrorCode[]): ErrorResponses {
  const byStatus = new Map<number, Set<ErrorCode>>();
  for (const c of codes) {
    const s = ERROR_CODES[c].status;
    const set = byStatus.get(s) ?? new Set<ErrorCode>();
    set.add(c);
    byStatus.set(s, set);
  }
  const out: Record<number, ProblemResponse> = {};
  for (const [status, set] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    const list = [...set].map((c) => `\`${c}\``).join(', ');
    out[status] = {
      description: `${list} (docs/errors.md)`,
      content: { [PROBLEM_TYPE]: { schema: ProblemRef } },
    };
  }
  return out as ErrorResponses;
}

type Built<D extends RouteDoc> = Omit<D, 'errors' | 'public' | 'writes' | 'response'> & {
  response: D['response'] & ErrorResponses;
  security?: [];
};

/** A route's schema: `d` with its error responses added (and no security for public routes). */
export function route<const D extends RouteDoc>(d: D): Built<D> {
  const { errors = [], public: isPublic, writes, response, ...rest } = d;
  const codes = [...new Set([...commonErrors(d), ...errors])];
  return {
    ...rest,
    ...(isPublic ? { security: [] as [] } : {}),
    response: { ...errorResponses(codes), ...response },
  } as unknown as Built<D>;
}
