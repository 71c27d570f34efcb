// `svc --json`: a failed command prints one JSON object on stderr (docs/errors.md, "In the
// CLI"), nothing on stdout, and exits with the same sysexits code as without --json.
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run, SVC_BIN, startTowerProc, stopAll, type TowerProc } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

interface Report {
  error: { code: string; message: string; exit_code: number; status?: number };
}

/** Parses stderr as exactly one JSON line. */
function report(stderr: string): Report {
  const lines = stderr.split('\n').filter((l) => l !== '');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0] as string) as Report;
}

/** A loopback port nobody listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

describe('svc --json errors', () => {
  let tower: TowerProc;
  let tmp: ReturnType<typeof makeTempDir>;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    tmp = makeTempDir('svc-json-errors-');
    env = { SVC_HOME: tmp.dir, SVC_TOKEN: '', SVC_BASE_URL: '' };
    tower = await startTowerProc(env);
    env.SVC_BASE_URL = tower.url;
  });
  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  it('reports a usage error as JSON with exit code 2', async () => {
    const r = await run(SVC_BIN, ['--json', 'domain', 'create'], env);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(report(r.stderr)).toEqual({
      error: { code: 'usage', message: "missing required argument 'name'", exit_code: 2 },
    });
  });

  it('reports an unreachable tower as JSON with exit code 69', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const r = await run(SVC_BIN, ['domain', 'list', '--json', '--url', url], env);
    expect(r.code).toBe(69);
    expect(r.stdout).toBe('');
    const e = report(r.stderr).error;
    expect(e).toEqual({ code: 'tower_unreachable', message: e.message, exit_code: 69, status: 503 });
    expect(e.message).toContain(`cannot reach the tower at ${url} (ECONNREFUSED)`);
  });

  it("reports the tower's 404 as JSON with its code and exit code 1", async () => {
    const r = await run(SVC_BIN, ['--json', 'domain', 'get', 'dom_nope'], env);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(report(r.stderr)).toEqual({
      error: { code: 'not_found', message: 'domain dom_nope not found', exit_code: 1, status: 404 },
    });
  });
});
