// Tower replicas for the benchmarks that run several on PostgreSQL (fleet, feed-fleet,
// channel-heap): `svc tower serve` from dist/ on one schema, rate limits and the
// auth-failure limit off, and the SQL that makes and drops the schema.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { ROOT } from './report.mjs';

export const PG_URL = process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Runs one SQL text on its own connection. */
export async function sql(text) {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

/**
 * Starts one replica with its SVC_HOME at `home`: resolves `{ child, home, url, output }` once
 * it listens, rejects if it exits first. `procs` gets it at once (cleanup of one that never
 * listened); `nodeArgs` are flags for its node (profiles, heap snapshots), `towerArgs` more
 * options of `svc tower serve`; `echo` copies its stdout to this process's.
 */
export function startReplica({
  home,
  schema,
  masterKey,
  procs,
  nodeArgs = [],
  towerArgs = [],
  echo = false,
  cwd,
}) {
  const env = { ...process.env, SVC_HOME: home, SVC_MASTER_KEY: masterKey };
  for (const k of Object.keys(env)) if (k.startsWith('SVC_TOWER_')) delete env[k];
  const args = [
    ...nodeArgs,
    join(ROOT, 'dist/cli/svc.js'),
    'tower',
    'serve',
    '--listen',
    '127.0.0.1:0',
    '--database',
    `${PG_URL}?schema=${schema}`,
    '--rate-limit',
    '0',
    '--auth-failure-limit',
    '0',
    '--log-level',
    'warn',
    ...towerArgs,
  ];
  const child = spawn(process.execPath, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const p = { child, home, url: null, output: () => out };
  procs?.push(p);
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      if (echo) process.stdout.write(d);
      out += d;
      const m = /listening on (\S+)/.exec(out);
      if (m && p.url === null) {
        p.url = m[1];
        resolve(p);
      }
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    child.once('exit', (code) => reject(new Error(`replica ${home} exited ${code}: ${out.slice(-2000)}`)));
  });
}
