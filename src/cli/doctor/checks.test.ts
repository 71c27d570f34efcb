import { describe, expect, it } from 'vitest';
import { runChecks } from './checks.js';
import type { DoctorFacts, PathFact } from './facts.js';
import { FLAPPING_RECONNECTS, RECENT_MS } from './feed-health.js';
import { makeReport, renderReport } from './report.js';

const NOW = Date.parse('2025-06-01T12:00:00Z');
const UID = 1000;
const dir = (path: string, mode = 0o700): PathFact => ({
  path,
  kind: 'dir',
  mode,
  uid: UID,
  writable: true,
  error: null,
});
const sock = (path: string, mode = 0o600): PathFact => ({ ...dir(path, mode), kind: 'socket' });
const missing = (path: string): PathFact => ({
  path,
  kind: 'missing',
  mode: null,
  uid: null,
  writable: false,
  error: null,
});
const iso = (t: number) => new Date(t).toISOString();

function healthy(): DoctorFacts {
  return {
    now: NOW,
    uid: UID,
    home: dir('/h'),
    skillsHome: { ...dir('/h/skills'), fromEnv: false },
    agentId: { file: '/h/agent_id', value: 'ag_1', error: null },
    identity: {
      file: '/h/node.json',
      why: 'SVC_HOME is set; /etc/svc/node.json is not used',
      fact: { ...dir('/h/node.json', 0o600), kind: 'file' },
      identity: { node_id: 'nd_1', hostname: 'n1', backend_url: 'http://127.0.0.1:8008', jwt: 'j' },
      error: null,
    },
    tower: { url: 'http://127.0.0.1:8008', source: 'daemon', health: { ok: true, status: 200, body: '{}' } },
    nodeAuth: { ok: true, status: 200, body: '{}' },
    operator: {
      url: 'http://127.0.0.1:8008',
      hasToken: true,
      error: null,
      probe: { ok: true, status: 200, body: '' },
    },
    daemon: {
      status: {
        version: '0.1.0',
        pid: 42,
        uptime_seconds: 5,
        backend_url: 'http://127.0.0.1:8008',
        components: { control: { connected: true, connects: 3, connected_since: iso(NOW - 1000) } },
      },
      error: null,
    },
    svcdDir: dir('/h/svcd'),
    sockets: ['/h/svcd/mgmt.sock', '/h/svcd/secrets.sock', '/h/svcd/svcd.sock'].map((p) => sock(p)),
    tools: [
      { name: 'bash', path: '/bin/bash' },
      { name: 'git', path: '/usr/bin/git' },
      { name: 'tmux', path: '/usr/bin/tmux' },
    ],
    systemctl: { path: '/bin/systemctl', userBus: true, result: { code: 0, out: 'running' } },
    fanout: {
      source: 'fanout.status',
      status: { enabled: true, upstream: { connected: true }, reconnects: [], throttles: [] },
    },
  };
}

const byName = (f: DoctorFacts) => Object.fromEntries(runChecks(f).map((c) => [c.name, c]));
const statusOf = (f: DoctorFacts, name: string) => byName(f)[name]?.status;

describe('doctor checks', () => {
  it('passes every check on a healthy node, in repair order, with no hints', () => {
    const checks = runChecks(healthy());
    expect(checks.map((c) => c.name)).toEqual([
      'svc_home',
      'svc_skills_home',
      'agent_id',
      'node_identity',
      'tower',
      'tower_auth',
      'operator_auth',
      'daemon',
      'control_channel',
      'state_db',
      'sockets',
      'tool:bash',
      'tool:git',
      'tool:tmux',
      'systemctl_user',
      'feed',
    ]);
    expect(checks.filter((c) => c.status !== 'ok')).toEqual([]);
    expect(checks.every((c) => c.hint === null)).toBe(true);
    expect(byName(healthy()).control_channel?.detail).toContain('2 reconnects since start');
  });

  it('names the identity file in use and why', () => {
    expect(byName(healthy()).node_identity?.detail).toBe(
      'n1 (nd_1) in /h/node.json (SVC_HOME is set; /etc/svc/node.json is not used)',
    );
    const f = healthy();
    f.identity = { ...f.identity, identity: null, error: 'no node identity at /h/node.json (ENOENT)' };
    expect(byName(f).node_identity?.detail).toBe(
      'no node identity at /h/node.json (ENOENT) (SVC_HOME is set; /etc/svc/node.json is not used)',
    );
  });

  const table: [string, (f: DoctorFacts) => void, string, 'warn' | 'fail', RegExp][] = [
    [
      'SVC_HOME missing',
      (f) => {
        f.home = missing('/h');
      },
      'svc_home',
      'fail',
      /--fix/,
    ],
    [
      'SVC_HOME world-writable',
      (f) => {
        f.home = dir('/h', 0o777);
      },
      'svc_home',
      'warn',
      /chmod 700 \/h/,
    ],
    [
      'SVC_SKILLS_HOME a file',
      (f) => {
        f.skillsHome = { ...dir('/s'), kind: 'file', fromEnv: true };
      },
      'svc_skills_home',
      'fail',
      /move it away/,
    ],
    [
      'no agent_id',
      (f) => {
        f.agentId = { file: '/h/agent_id', value: null, error: null };
      },
      'agent_id',
      'warn',
      /--fix/,
    ],
    [
      'garbage agent_id',
      (f) => {
        f.agentId = { file: '/h/agent_id', value: null, error: 'junk' };
      },
      'agent_id',
      'fail',
      /remove \/h\/agent_id/,
    ],
    [
      'identity missing',
      (f) => {
        f.identity = { ...f.identity, identity: null, error: 'no node identity' };
      },
      'node_identity',
      'fail',
      /svc agent node register/,
    ],
    [
      'identity 0644',
      (f) => {
        f.identity.fact.mode = 0o644;
      },
      'node_identity',
      'fail',
      /chmod 600 \/h\/node\.json/,
    ],
    [
      'tower refused',
      (f) => {
        f.tower.health = { ok: false, error: 'ECONNREFUSED' };
      },
      'tower',
      'fail',
      /svc tower serve/,
    ],
    [
      'tower 503',
      (f) => {
        f.tower.health = { ok: true, status: 503, body: '' };
      },
      'tower',
      'fail',
      /svc tower serve/,
    ],
    [
      'node JWT rejected',
      (f) => {
        f.nodeAuth = { ok: true, status: 401, body: '{"detail":"bad token"}' };
      },
      'tower_auth',
      'fail',
      /--force/,
    ],
    [
      'operator token rejected',
      (f) => {
        f.operator.probe = { ok: true, status: 401, body: '' };
      },
      'operator_auth',
      'fail',
      /svc login/,
    ],
    [
      'operator token narrow',
      (f) => {
        f.operator.probe = { ok: true, status: 403, body: '' };
      },
      'operator_auth',
      'warn',
      /svc login/,
    ],
    [
      'no operator token',
      (f) => {
        f.operator = { ...f.operator, hasToken: false, probe: null };
      },
      'operator_auth',
      'warn',
      /SVC_TOKEN/,
    ],
    [
      'svcd down',
      (f) => {
        f.daemon = { status: null, error: 'ENOENT' };
      },
      'daemon',
      'warn',
      /svc daemon up/,
    ],
    [
      'control down',
      (f) => {
        const s = f.daemon.status as { components: { control: { connected: boolean } } };
        s.components.control.connected = false;
      },
      'control_channel',
      'warn',
      /reconnects by itself/,
    ],
    [
      'state.db full',
      (f) => {
        const s = f.daemon.status as { components: Record<string, unknown> };
        s.components.cron = {
          state_error: {
            file: '/h/svcd/state.db',
            since: iso(NOW - 60_000),
            detail: 'SQLITE_FULL: database or disk is full',
            skipped_fires: 3,
            last_minute: iso(NOW),
          },
        };
      },
      'state_db',
      'fail',
      /free space on the file system of state.db/,
    ],
    [
      'outbox holding events in memory',
      (f) => {
        const s = f.daemon.status as { components: Record<string, unknown> };
        s.components.outbox = { state_error: 'SQLITE_FULL database or disk is full', held_in_memory: 2 };
      },
      'state_db',
      'warn',
      /resumes by itself/,
    ],
    [
      'mgmt.sock 0666',
      (f) => {
        f.sockets[0] = sock('/h/svcd/mgmt.sock', 0o666);
      },
      'sockets',
      'fail',
      /chmod 600 \/h\/svcd\/mgmt\.sock/,
    ],
    [
      'svcd dir 0755',
      (f) => {
        f.svcdDir = dir('/h/svcd', 0o755);
      },
      'sockets',
      'fail',
      /chmod 700 \/h\/svcd/,
    ],
    [
      'socket gone while running',
      (f) => {
        f.sockets[1] = missing('/h/svcd/secrets.sock');
      },
      'sockets',
      'fail',
      /svc daemon down && svc daemon up/,
    ],
    [
      'tmux missing',
      (f) => {
        f.tools[2] = { name: 'tmux', path: null };
      },
      'tool:tmux',
      'fail',
      /install tmux/,
    ],
    [
      'no systemctl',
      (f) => {
        f.systemctl = { path: null, userBus: false, result: null };
      },
      'systemctl_user',
      'warn',
      /systemd/,
    ],
    [
      'no user bus',
      (f) => {
        f.systemctl = { path: '/bin/systemctl', userBus: false, result: null };
      },
      'systemctl_user',
      'warn',
      /enable-linger/,
    ],
    [
      'user manager offline',
      (f) => {
        f.systemctl.result = { code: 1, out: 'offline' };
      },
      'systemctl_user',
      'warn',
      /--no-systemd/,
    ],
    [
      'no fan-out status',
      (f) => {
        f.fanout = { source: null, reason: 'method not found' };
      },
      'feed',
      'warn',
      /update svc/,
    ],
    [
      'upstream down',
      (f) => {
        f.fanout = { source: 'fanout.status', status: { upstream: { connected: false, last_status: 503 } } };
      },
      'feed',
      'warn',
      /tower_auth/,
    ],
    [
      'throttled now',
      (f) => {
        f.fanout = { source: 'fanout.status', status: { upstream: 'up', throttled: true } };
      },
      'feed',
      'warn',
      /rate limit/,
    ],
  ];
  it.each(table)('%s → %s is %s with a hint', (_what, breakIt, name, status, hint) => {
    const f = healthy();
    breakIt(f);
    const c = byName(f)[name];
    expect(c?.status).toBe(status);
    expect(c?.hint).toMatch(hint);
  });

  it('skips node auth with a warning when there is no identity or no tower, so only the cause fails', () => {
    const noTower = healthy();
    noTower.tower.health = { ok: false, error: 'ECONNREFUSED' };
    noTower.nodeAuth = null;
    expect(byName(noTower).tower_auth).toMatchObject({
      status: 'warn',
      detail: 'not checked: the tower is not reachable',
    });
    const noId = healthy();
    noId.identity = { ...noId.identity, identity: null, error: 'missing' };
    expect(statusOf(noId, 'tower_auth')).toBe('warn');
  });

  it('counts only the last hour of fan-out reconnects and rate-limit pauses', () => {
    const f = healthy();
    const old = NOW - RECENT_MS - 1;
    f.fanout = {
      source: 'daemon.status',
      status: {
        upstream: 'up',
        reconnects: [iso(old), { at: iso(NOW - 60_000) }],
        throttles: [{ start: iso(old - 5000), end: iso(old) }],
      },
    };
    const c = byName(f).feed;
    expect(c?.status).toBe('ok');
    expect(c?.detail).toBe(
      `upstream up; 1 reconnects in the last hour (last ${iso(NOW - 60_000)}); 0 rate-limit pauses in the last hour`,
    );
    f.fanout.status.throttles = [{ since: iso(NOW - 120_000), until: iso(NOW - 60_000) }];
    expect(byName(f).feed?.status).toBe('warn');
    expect(byName(f).feed?.detail).toContain(
      `1 rate-limit pauses in the last hour (last from ${iso(NOW - 120_000)})`,
    );
  });

  it("reads svcd's fanout.status: upstream state and outages, rate_limit holding and throttles", () => {
    const f = healthy();
    const status = {
      enabled: true,
      upstream: {
        state: 'down',
        reconnects: [iso(NOW - 30_000)],
        outages: [{ down_at: iso(NOW - 10_000), up_at: null, status: 503, attempts: 2 }],
      },
      rate_limit: { holding: false, throttles: [] as unknown[] },
    };
    f.fanout = { source: 'fanout.status', status };
    expect(byName(f).feed).toMatchObject({
      status: 'warn',
      detail: `upstream down (status 503, since ${iso(NOW - 10_000)}); 1 reconnects in the last hour (last ${iso(NOW - 30_000)}); 0 rate-limit pauses in the last hour`,
    });
    status.upstream.state = 'up';
    status.rate_limit = {
      holding: true,
      throttles: [
        {
          started_at: iso(NOW - 2000),
          reset_at: iso(NOW + 1000),
          until: iso(NOW + 2000),
          held: 3,
          released_at: null,
        },
      ],
    };
    expect(byName(f).feed?.detail).toBe(
      `upstream up; 1 reconnects in the last hour (last ${iso(NOW - 30_000)}); 1 rate-limit pauses in the last hour (last from ${iso(NOW - 2000)}); retransmission paused by the rate limit now`,
    );
    expect(byName(f).feed?.status).toBe('warn');
  });

  it('warns on a flapping upstream', () => {
    const f = healthy();
    const times = Array.from({ length: FLAPPING_RECONNECTS + 1 }, (_, i) => iso(NOW - i * 1000));
    f.fanout = { source: 'fanout.status', status: { upstream: 'up', reconnects: times } };
    expect(statusOf(f, 'feed')).toBe('warn');
    f.fanout.status.reconnects = times.slice(1);
    expect(statusOf(f, 'feed')).toBe('ok');
  });

  it('reports a disabled fan-out as ok', () => {
    const f = healthy();
    f.fanout = { source: 'fanout.status', status: { enabled: false } };
    expect(byName(f).feed).toMatchObject({
      status: 'ok',
      detail: 'local fan-out disabled ([fanout] in config.toml)',
    });
  });

  it('summarizes: ok is false exactly when a check failed; the table lists hints', () => {
    const f = healthy();
    f.tools[2] = { name: 'tmux', path: null };
    f.daemon = { status: null, error: 'ENOENT' };
    const r = makeReport(runChecks(f), [{ name: 'svc_home', action: '/h already present', changed: false }]);
    expect(r.ok).toBe(false);
    expect(r.summary).toEqual({ ok: 12, warn: 2, fail: 1 });
    const text = renderReport(r);
    expect(text).toMatch(/^fix svc_home: \/h already present$/m);
    expect(text).toMatch(/^fail {4}tool:tmux +tmux is not on PATH/m);
    expect(text).toMatch(/^ {2}tool:tmux: install tmux/m);
    expect(text.endsWith('12 ok, 2 warnings, 1 failed')).toBe(true);
    expect(makeReport(runChecks(healthy()), []).ok).toBe(true);
  });
});
