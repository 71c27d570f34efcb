// Shapes shared by every record: ids, timestamps, list envelopes and list queries.
import { type Static, type TSchema, Type } from './type.js';

export const Id = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9_.:-]+$' });
export const Timestamp = Type.String({ format: 'date-time' });
export const Name = Type.String({ minLength: 1, maxLength: 200 });
export const LongText = Type.String({ maxLength: 100_000 });

/**
 * The ranges of the stores' integer columns, for every integer a request may put in one: both
 * stores must take or refuse the same values (SQLite keeps any number; PostgreSQL refuses
 * what its column cannot hold). `integer` columns: 32 bits. `bigint` columns: as far as a
 * JSON number is exact (beyond 2^53 a double no longer says which integer it is).
 */
export const INT32_RANGE = { minimum: -2_147_483_648, maximum: 2_147_483_647 } as const;
export const BIGINT_RANGE = { minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER } as const;

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type ListQuery = Static<typeof ListQuery>;

export const ListOf = <T extends TSchema>(item: T) =>
  Type.Object({ items: Type.Array(item), next_cursor: Type.Union([Type.String(), Type.Null()]) });

export interface List<T> {
  items: T[];
  next_cursor: string | null;
}

export const Empty = Type.Object({}, { additionalProperties: false });

/** Route params naming one record: `{ [name]: Id }` (typed by its name, for route handlers). */
export const IdParam = <N extends string>(name: N) =>
  Type.Object({ [name]: Id } as Record<N, typeof Id>, { additionalProperties: false });
