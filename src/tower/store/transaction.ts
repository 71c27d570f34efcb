// One transaction on any Kysely database of the tower, with the cause of a failure kept: the
// helper under store/tx.ts's writes, migrations and the key rotation.
import type { Kysely, Transaction } from 'kysely';

/**
 * `db.transaction().execute(fn)`, except that a rollback which fails never replaces the error
 * that caused it: SQLite ends a transaction by itself on SQLITE_FULL or an I/O error, and
 * Kysely would then report "cannot rollback - no transaction is active" instead of the cause.
 */
export async function transaction<DB, T>(
  db: Kysely<DB>,
  fn: (trx: Transaction<DB>) => Promise<T>,
): Promise<T> {
  const trx = await db.startTransaction().execute();
  let result: T;
  try {
    result = await fn(trx);
  } catch (e) {
    await trx
      .rollback()
      .execute()
      .catch(() => {});
    throw e;
  }
  await trx.commit().execute();
  return result;
}
