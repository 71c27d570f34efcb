// `svc system doctor` against real processes: each failure it claims to detect is produced by
// breaking that thing (homes missing, no identity, bad node JWT, bad operator token, a socket
// with the wrong mode, a tool missing from PATH, the tower down), and --fix repairs what it
// says it repairs, idempotently.
import { chmodSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import {
  isolatedEnv,
  run,
  SVC_BIN,
  SVCD_BIN,
  spawnProc,
  startTowerProc,
  stopAll,
  type TowerProc,
} from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

interface Check {
  name: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  hint: string | null;
}
interface Report {
  ok: boolean;
  summary: Record<string, number>;
  checks: Check[];
  fixes: { name: string; action: string; changed: boolean }[];
}

describe('svc system doctor', () => {
  const tmp = makeTempDir('svc-e2e-doctor-');
  const base = isolatedEnv(tmp.dir);
  const home = base.SVC_HOME as string;
  const skills = join(tmp.dir, 'skills');
  const nodeFile = base.SVC_NODE_FILE as string;
  let env: NodeJS.ProcessEnv = { ...base, SVC_SKILLS_HOME: skills };
  let tower: TowerProc;

  const doctor = async (extra: NodeJS.ProcessEnv = {}, ...args: string[]) => {
    const r = await run(SVC_BIN, ['--json', 'system', 'doctor', ...args], { ...env, ...extra });
    let report: Report;
    try {
      report = JSON.parse(r.stdout) as Report;
    } catch {
      throw new Error(`doctor printed no JSON (exit ${r.code}): ${r.stderr}`);
    }
    const check = (name: string): Check => {
      const c = report.checks.find((x) => x.name === name);
      if (!c) throw new Error(`no check ${name} in ${r.stdout}`);
      return c;
    };
    return {
      code: r.code,
      report,
      check,
      failed: report.checks.filter((c) => c.status === 'fail').map((c) => c.name),
    };
  };

  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  it('reports missing SVC_HOME and SVC_SKILLS_HOME; --fix creates them and seeds one stable agent_id', async () => {
    const before = await doctor();
    expect(before.code).toBe(1);
    expect(before.check('svc_home')).toMatchObject({
      status: 'fail',
      detail: `${home} does not exist (SVC_HOME)`,
    });
    expect(before.check('svc_home').hint).toMatch(/svc system doctor --fix/);
    expect(before.check('svc_skills_home')).toMatchObject({
      status: 'fail',
      detail: `${skills} does not exist (SVC_SKILLS_HOME)`,
    });
    expect(before.check('agent_id').status).toBe('warn');

    const fixed = await doctor({}, '--fix');
    const agentFile = join(home, 'agent_id');
    const agentId = readFileSync(agentFile, 'utf8').trim();
    expect(agentId).toMatch(/^ag_[0-9a-z]{26}$/);
    expect(fixed.report.fixes).toEqual([
      { name: 'svc_home', action: `created ${home} (0700)`, changed: true },
      { name: 'svc_skills_home', action: `created ${skills} (0700)`, changed: true },
      { name: 'agent_id', action: `seeded ${agentId} in ${agentFile}`, changed: true },
    ]);
    expect(statSync(home).mode & 0o777).toBe(0o700);
    expect(statSync(skills).mode & 0o777).toBe(0o700);
    expect(statSync(agentFile).mode & 0o777).toBe(0o600);
    expect(fixed.check('svc_home').status).toBe('ok');
    expect(fixed.check('svc_skills_home').status).toBe('ok');
    expect(fixed.check('agent_id')).toMatchObject({ status: 'ok', detail: `${agentId} (${agentFile})` });

    const again = await doctor({}, '--fix');
    expect(again.report.fixes.map((f) => f.changed)).toEqual([false, false, false]);
    expect(again.report.fixes[2]?.action).toBe(`${agentId} already seeded`);
    expect(readFileSync(agentFile, 'utf8').trim()).toBe(agentId);
  });

  it('reports a missing node identity and says how to register', async () => {
    const r = await doctor();
    expect(r.code).toBe(1);
    expect(r.check('node_identity').status).toBe('fail');
    expect(r.check('node_identity').detail).toContain(`no node identity at ${nodeFile}`);
    expect(r.check('node_identity').detail).toMatch(/\(SVC_NODE_FILE is set\)$/);
    // Without SVC_NODE_FILE the explicit SVC_HOME decides, whatever /etc/svc holds.
    const byHome = await doctor({ SVC_NODE_FILE: '' });
    expect(byHome.check('node_identity').detail).toBe(
      `no node identity at ${join(home, 'node.json')} (ENOENT) (SVC_HOME is set; /etc/svc/node.json is not used)`,
    );
    expect(r.check('node_identity').hint).toMatch(/^svc agent node register --hostname/);
    expect(r.check('tower_auth')).toMatchObject({ status: 'warn', detail: 'not checked: no node identity' });
  });

  it('passes on a registered node with a running svcd', async () => {
    tower = await startTowerProc(env);
    env = { ...env, SVC_BASE_URL: tower.url };
    expect((await run(SVC_BIN, ['agent', 'node', 'register', '--hostname', 'doctor-e2e'], env)).code).toBe(0);
    const svcd = spawnProc(SVCD_BIN, ['run', '--log-level', 'warn'], env);
    await waitFor(
      'svcd connected to the tower',
      async () => {
        const code = await Promise.race([svcd.exited, Promise.resolve(null)]);
        if (code !== null) throw new Error(`svcd exited (${code}): ${svcd.stderr()}`);
        return (await doctor()).check('control_channel').status === 'ok';
      },
      { timeoutMs: 30_000 },
    );
    const r = await doctor();
    expect(r.failed).toEqual([]);
    expect(r.code).toBe(0);
    expect(r.report.ok).toBe(true);
    for (const name of ['node_identity', 'tower', 'tower_auth', 'operator_auth', 'daemon', 'sockets']) {
      expect(r.check(name).status, name).toBe('ok');
    }
    expect(r.check('tower').detail).toBe(`${tower.url} answers /healthz (from the daemon)`);
    expect(r.check('node_identity').detail).toMatch(
      new RegExp(`^doctor-e2e \\(node_\\w+\\) in ${nodeFile} \\(the running svcd uses it\\)$`),
    );
    expect(r.check('sockets').detail).toBe(
      `${join(home, 'svcd')} 0700; mgmt.sock, secrets.sock, svcd.sock 0600`,
    );
    expect(r.check('feed')).toMatchObject({
      status: 'ok',
      detail: 'local fan-out disabled ([fanout] in config.toml)',
    });
    // The test environment has no user bus.
    expect(r.check('systemctl_user').status).toBe('warn');
  });

  it('reports a node JWT the tower rejects and an operator token it rejects', async () => {
    const good = readFileSync(nodeFile, 'utf8');
    const id = JSON.parse(good) as { jwt: string };
    writeFileSync(nodeFile, JSON.stringify({ ...id, jwt: `${id.jwt.slice(0, -4)}AAAA` }), { mode: 0o600 });
    try {
      const r = await doctor();
      expect(r.code).toBe(1);
      expect(r.failed).toEqual(['tower_auth']);
      expect(r.check('tower_auth').detail).toMatch(/rejects the node JWT .*HTTP 401/);
      expect(r.check('tower_auth').hint).toMatch(/--force/);
    } finally {
      writeFileSync(nodeFile, good, { mode: 0o600 });
    }
    const op = await doctor({ SVC_TOKEN: 'not-a-token' });
    expect(op.code).toBe(1);
    expect(op.failed).toEqual(['operator_auth']);
    expect(op.check('operator_auth').detail).toMatch(/rejects the operator token \(HTTP 401/);
  });

  it('reports an identity file and a socket other users can read', async () => {
    chmodSync(nodeFile, 0o644);
    const sock = join(home, 'svcd', 'mgmt.sock');
    chmodSync(sock, 0o666);
    try {
      const r = await doctor();
      expect(r.code).toBe(1);
      expect(r.failed).toEqual(['node_identity', 'sockets']);
      expect(r.check('node_identity').hint).toBe(`chmod 600 ${nodeFile}`);
      expect(r.check('sockets').detail).toContain(`${sock} is 0666`);
      expect(r.check('sockets').hint).toMatch(new RegExp(`^chmod 600 ${sock}, or svc daemon down`));
    } finally {
      chmodSync(nodeFile, 0o600);
      chmodSync(sock, 0o600);
    }
    expect((await doctor()).code).toBe(0);
  });

  it('reports a required tool missing from PATH', async () => {
    const bin = join(tmp.dir, 'bin');
    mkdirSync(bin);
    for (const t of ['bash', 'git']) {
      const found = (await run(SVC_BIN, ['--json', 'system', 'doctor'], env)).stdout;
      const path = (JSON.parse(found) as Report).checks.find((c) => c.name === `tool:${t}`)?.detail as string;
      symlinkSync(path, join(bin, t));
    }
    const r = await doctor({ PATH: bin });
    expect(r.code).toBe(1);
    expect(r.failed).toEqual(['tool:tmux']);
    expect(r.check('tool:tmux').detail).toBe('tmux is not on PATH (needed for mux_hosted agents)');
    expect(r.check('tool:bash')).toMatchObject({ status: 'ok', detail: join(bin, 'bash') });
    expect(r.check('systemctl_user').detail).toMatch(/^systemctl is not on PATH/);
  });

  it('reports the tower down, and svcd losing its control channel', async () => {
    tower.kill('SIGKILL');
    await tower.exited;
    const r = await waitFor('svcd to notice', async () => {
      const d = await doctor();
      return d.check('control_channel').status === 'warn' ? d : null;
    });
    expect(r.code).toBe(1);
    expect(r.failed).toEqual(['tower']);
    expect(r.check('tower').detail).toMatch(
      new RegExp(`^${tower.url} \\(from the daemon\\) is not healthy: ECONNREFUSED`),
    );
    expect(r.check('tower_auth')).toMatchObject({
      status: 'warn',
      detail: 'not checked: the tower is not reachable',
    });
    expect(r.check('operator_auth').status).toBe('warn');
  });
});
