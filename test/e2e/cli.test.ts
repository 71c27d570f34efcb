// The operator CLI against a real tower: login, tokens, domains and missions, with human
// tables and --json, and the exit codes scripts rely on.
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import {
  run,
  SVC_BIN,
  SVCD_BIN,
  spawnProc,
  startTowerProc,
  stopAll,
  type TowerProc,
} from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

describe('svc against a tower', () => {
  let tower: TowerProc;
  let tmp: ReturnType<typeof makeTempDir>;
  let env: NodeJS.ProcessEnv;
  const svc = (args: string[], extra: NodeJS.ProcessEnv = {}) => run(SVC_BIN, args, { ...env, ...extra });

  beforeAll(async () => {
    tmp = makeTempDir('svc-cli-');
    env = { SVC_HOME: tmp.dir, SVC_TOKEN: '', SVC_BASE_URL: '' };
    tower = await startTowerProc(env);
    env.SVC_BASE_URL = tower.url;
  });
  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  it('creates a token shown once, lists it without its value, and revokes it', async () => {
    const created = await svc([
      '--json',
      'token',
      'create',
      '--name',
      'ci',
      '--scope',
      'work:write',
      '--ttl',
      '1h',
    ]);
    expect(created.code).toBe(0);
    const tok = JSON.parse(created.stdout) as {
      id: string;
      token: string;
      scopes: string[];
      expires_at: string;
    };
    expect(tok.token).toMatch(/^svc_/);
    expect(tok.scopes).toEqual(['work:write']);
    const listed = await svc(['token', 'list']);
    expect(listed.stdout).toContain(tok.id);
    expect(listed.stdout).not.toContain(tok.token);
    const revoked = await svc(['token', 'revoke', tok.id]);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toBe(`revoked ${tok.id} (ci)\n`);
    const refused = await svc(['--token', tok.token, 'domain', 'list']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe('svc: error: token revoked [unauthenticated]\n');
  });

  it('rejects an unknown scope as a usage error', async () => {
    const res = await svc(['token', 'create', '--name', 'x', '--scope', 'root']);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('unknown scope "root"');
  });

  it('logs in with a token, storing credentials 0600, and uses them afterwards', async () => {
    const created = JSON.parse(
      (await svc(['--json', 'token', 'create', '--name', 'op', '--scope', 'admin'])).stdout,
    ) as {
      token: string;
    };
    const other = makeTempDir('svc-cli-login-');
    try {
      const loginEnv = { SVC_HOME: other.dir, SVC_BASE_URL: '' };
      const bad = await run(SVC_BIN, ['login', '--url', tower.url, '--token', 'svc_wrong'], loginEnv);
      expect(bad.code).toBe(1);
      const ok = await run(SVC_BIN, ['login', '--url', tower.url, '--token', created.token], loginEnv);
      expect(ok.code).toBe(0);
      const file = join(other.dir, 'credentials.json');
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const dom = await run(SVC_BIN, ['--json', 'domain', 'create', 'from-login'], loginEnv);
      expect(dom.code).toBe(0);
      expect(JSON.parse(dom.stdout).name).toBe('from-login');
    } finally {
      other.remove();
    }
  });

  it('creates, lists and gets domains and missions as tables and JSON', async () => {
    const d = JSON.parse(
      (await svc(['--json', 'domain', 'create', 'ops', '--description', 'operations'])).stdout,
    ) as {
      id: string;
    };
    const got = await svc(['domain', 'get', d.id]);
    expect(got.stdout).toContain(`id:          ${d.id}`);
    expect(got.stdout).toContain('description: operations');
    const m = await svc([
      '--json',
      'mission',
      'create',
      'deploy',
      '--domain',
      d.id,
      '--repository',
      '/srv/app',
    ]);
    expect(m.code).toBe(0);
    const mission = JSON.parse(m.stdout) as { id: string; repository: string };
    expect(mission.repository).toBe('/srv/app');
    const table = await svc(['mission', 'list', '--domain', d.id]);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+REPOSITORY\s+CREATED$/);
    expect(table.stdout).toContain(mission.id);
    const json = JSON.parse((await svc(['--json', 'mission', 'list', '--domain', d.id])).stdout) as {
      items: { id: string }[];
      next_cursor: string | null;
    };
    expect(json).toEqual({ items: [expect.objectContaining({ id: mission.id })], next_cursor: null });
    const missing = await svc(['mission', 'get', 'mis_nope', '--domain', d.id]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('svc: error: mission mis_nope not found [not_found]\n');
  });

  it('stops following the feed when its reader goes away (svc feed | head), without a stack trace', async () => {
    const d = JSON.parse((await svc(['--json', 'domain', 'create', 'piped'])).stdout) as { id: string };
    const m = JSON.parse((await svc(['--json', 'mission', 'create', 'p', '--domain', d.id])).stdout) as {
      id: string;
    };
    const submit = () => svc(['task', 'submit', '--mission', m.id, '--title', 't']);
    const feed = spawnProc(SVC_BIN, ['feed', '--json', '--since', '0', '--mission', m.id], env);
    expect((await submit()).code).toBe(0);
    await waitFor('the first event on svc feed', () => feed.stdout().includes('\n'));
    // The reader leaves, as `head -1` does after its line: svc's next write meets EPIPE.
    feed.child.stdout?.destroy();
    expect((await submit()).code).toBe(0);
    expect(await feed.exited).toBe(141);
    expect(feed.stderr()).not.toMatch(/EPIPE|at /);
  });

  it('builds svc and svcd as executables (npx runs them as package bins, with no node in front)', async () => {
    for (const bin of [SVC_BIN, SVCD_BIN]) {
      expect(statSync(bin).mode & 0o111, bin).toBe(0o111);
      const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
      expect(r.status, `${bin}: ${r.stderr}`).toBe(0);
    }
  });
});
