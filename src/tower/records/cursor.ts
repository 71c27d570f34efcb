// Opaque list cursors: the last id of a page, base64url encoded. Ids sort by creation time,
// so "id > cursor ORDER BY id" pages stably while rows are added.
import { SvcError } from '../../protocol/errors.js';

export function encodeCursor(lastId: string): string {
  return Buffer.from(lastId, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string | undefined): string | null {
  if (cursor === undefined || cursor === '') return null;
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[A-Za-z0-9_.:-]{1,100}$/.test(id)) {
    throw new SvcError('validation_failed', 'query/cursor: is not a cursor this server issued', {
      errors: [{ field: 'query/cursor', message: 'is not a cursor this server issued' }],
    });
  }
  return id;
}

/** Splits a limit+1 result into a page and the cursor for the next one. */
export function page<T extends { id: string }>(
  rows: T[],
  limit: number,
): { items: T[]; next_cursor: string | null } {
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  const last = items[items.length - 1];
  return { items, next_cursor: more && last ? encodeCursor(last.id) : null };
}
