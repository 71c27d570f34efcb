// The operator side of secrets through the built CLI against a real tower process:
// values go in on stdin only, never come back out, and never reach disk or logs in clear.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run, SVC_BIN, startTowerProc, stopAll, type TowerProc } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

const VALUE = 'e2e-secret-value-4f9d2a7b1c';

function listFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...listFiles(p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

describe('svc secret against a running tower', () => {
  const home = makeTempDir('svc-e2e-secrets-');
  let tower: TowerProc;

  const svc = async (args: string[], stdin?: string) => {
    const r = await run(SVC_BIN, args, { SVC_HOME: home.dir, SVC_BASE_URL: tower.url }, stdin ?? '');
    return { ...r, code: r.code as number };
  };

  beforeAll(async () => {
    tower = await startTowerProc({ SVC_HOME: home.dir }, ['--log-level', 'debug']);
  });
  afterAll(async () => {
    await stopAll();
    home.remove();
  });

  it('sets from stdin, lists without values, grants, revokes, rotates and deletes', async () => {
    const domain = await svc(['domain', 'create', 'ops', '--json']);
    expect(domain.code, domain.stderr).toBe(0);
    const domainId = (JSON.parse(domain.stdout) as { id: string }).id;

    const set = await svc(['secret', 'set', 'DEPLOY_KEY', '--domain', domainId], `${VALUE}\n`);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toBe(`DEPLOY_KEY set in ${domainId}: version 1\n`);
    const again = await svc(['secret', 'set', 'DEPLOY_KEY', '--domain', domainId, '--json'], VALUE);
    expect((JSON.parse(again.stdout) as { version: number }).version).toBe(2);

    const grant = await svc([
      'secret',
      'grant',
      'DEPLOY_KEY',
      '--domain',
      domainId,
      '--agent',
      'agt_one',
      '--agent',
      'agt_two',
    ]);
    expect(grant.code, grant.stderr).toBe(0);
    expect(grant.stdout).toBe('granted DEPLOY_KEY to agt_one\ngranted DEPLOY_KEY to agt_two\n');

    const list = await svc(['secret', 'list', '--domain', domainId]);
    expect(list.code).toBe(0);
    const lines = list.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+DOMAIN\s+VERSION\s+UPDATED\s+GRANTS$/);
    expect(lines[1]).toMatch(new RegExp(`^DEPLOY_KEY\\s+${domainId}\\s+2\\s+\\S+\\s+agt_one agt_two$`));

    const revoke = await svc(['secret', 'revoke', 'DEPLOY_KEY', '--domain', domainId, '--agent', 'agt_one']);
    expect(revoke.stdout).toBe('revoked DEPLOY_KEY from agt_one\n');
    const described = await svc(['secret', 'describe', 'DEPLOY_KEY', '--domain', domainId, '--json']);
    const info = JSON.parse(described.stdout) as {
      grants: { agent_id: string }[];
      versions: { version: number }[];
    };
    expect(info.grants.map((g) => g.agent_id)).toEqual(['agt_two']);
    expect(info.versions.map((v) => v.version)).toEqual([2, 1]);

    const rotated = await svc(['tower', 'rotate-master-key', '--json']);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect((JSON.parse(rotated.stdout) as { reencrypted: number }).reencrypted).toBe(2);
    const status = await svc(['tower', 'master-key']);
    expect(status.stdout).toMatch(
      /^key_id:\s+mk_[0-9a-f]{16}\nsource:\s+master\.key\nprevious:\s+-\nversions:\s+mk_[0-9a-f]{16}=2\n$/,
    );

    const bad = await svc(['secret', 'set', 'no spaces', '--domain', domainId], VALUE);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('invalid secret name "no spaces"');
    const empty = await svc(['secret', 'set', 'EMPTY', '--domain', domainId], '\n');
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('stdin was empty');
    const missing = await svc(['secret', 'rm', 'NOPE', '--domain', domainId]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(
      `svc: error: secret NOPE not found in domain ${domainId} [secret_not_found]\n`,
    );

    const rm = await svc(['secret', 'rm', 'DEPLOY_KEY', '--domain', domainId]);
    expect(rm.stdout).toBe('deleted DEPLOY_KEY\n');
    expect((await svc(['secret', 'list', '--json'])).stdout).toContain('"items": []');

    // Nothing in clear anywhere: every file under SVC_HOME (the SQLite database, its WAL,
    // master.key, admin.token) and the tower's own log.
    const files = listFiles(home.dir);
    expect(files.some((f) => f.endsWith('tower.db'))).toBe(true);
    for (const f of files) expect(readFileSync(f).includes(Buffer.from(VALUE)), f).toBe(false);
    expect(tower.stdout() + tower.stderr()).not.toContain(VALUE);
    expect((statSync(join(home.dir, 'tower', 'master.key')).mode & 0o777).toString(8)).toBe('600');
  });
});
