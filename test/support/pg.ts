// A fresh PostgreSQL schema per test run on the local server (trust auth), dropped after.
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const PG_BASE_URL = process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestSchema {
  schema: string;
  /** Database URL selecting the schema (?schema=…), as `svc tower serve --database` takes it. */
  url: string;
  drop(): Promise<void>;
}

export async function createTestSchema(): Promise<TestSchema> {
  const schema = `t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client({ connectionString: PG_BASE_URL });
  await client.connect();
  try {
    await client.query(`create schema "${schema}"`);
  } finally {
    await client.end();
  }
  const sep = PG_BASE_URL.includes('?') ? '&' : '?';
  return {
    schema,
    url: `${PG_BASE_URL}${sep}schema=${schema}`,
    async drop() {
      const c = new pg.Client({ connectionString: PG_BASE_URL });
      await c.connect();
      try {
        await c.query(`drop schema if exists "${schema}" cascade`);
      } finally {
        await c.end();
      }
    },
  };
}
