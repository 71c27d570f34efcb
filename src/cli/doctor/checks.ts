// The doctor's verdicts: DoctorFacts in, one Check per concern out. Pure; the order of the
// list is the order an operator repairs things in (homes, identity, tower, daemon, tools, feed).

import type { DoctorFacts, HttpProbe, PathFact } from './facts.js';
import { feedCheck } from './feed-health.js';
import type { Check } from './report.js';

const ok = (name: string, detail: string): Check => ({ name, status: 'ok', detail, hint: null });
const warn = (name: string, detail: string, hint: string): Check => ({ name, status: 'warn', detail, hint });
const fail = (name: string, detail: string, hint: string): Check => ({ name, status: 'fail', detail, hint });

export const octal = (mode: number | null): string =>
  mode === null ? '-' : `0${(mode & 0o777).toString(8)}`;

/** A directory svc writes into: present, a directory, writable, not writable by others. */
function dirCheck(name: string, f: PathFact, what: string, fixable: boolean): Check {
  const fix = fixable ? 'run "svc system doctor --fix" to create it' : `mkdir -p -m 700 ${f.path}`;
  if (f.error)
    return fail(name, `${f.path}: ${f.error}`, `check the permissions of ${f.path} and its parents`);
  if (f.kind === 'missing') return fail(name, `${f.path} does not exist (${what})`, fix);
  if (f.kind !== 'dir') return fail(name, `${f.path} is not a directory`, `move it away, then ${fix}`);
  if (!f.writable) return fail(name, `${f.path} is not writable by this user`, `chown/chmod ${f.path}`);
  if (f.mode !== null && (f.mode & 0o022) !== 0) {
    return warn(name, `${f.path} is ${octal(f.mode)}: other users can write into it`, `chmod 700 ${f.path}`);
  }
  return ok(name, `${f.path} (${octal(f.mode)})`);
}

function probeError(p: HttpProbe): string | null {
  return p.ok ? null : p.error;
}

/** The first line of a problem+json body's detail/title, else the status. */
function problemText(p: HttpProbe & { ok: true }): string {
  try {
    const b = JSON.parse(p.body) as { detail?: unknown; title?: unknown };
    const t = typeof b.detail === 'string' ? b.detail : typeof b.title === 'string' ? b.title : null;
    if (t) return `HTTP ${p.status}: ${t}`;
  } catch {
    // not JSON: the status says enough
  }
  return `HTTP ${p.status}`;
}

function nodeChecks(f: DoctorFacts): Check[] {
  const out: Check[] = [];
  const id = f.identity;
  const register = `svc agent node register --hostname <hostname> --url ${f.tower.url}`;
  if (!id.identity) {
    out.push(fail('node_identity', `${id.error ?? `no node identity at ${id.file}`} (${id.why})`, register));
  } else if (id.fact.mode !== null && (id.fact.mode & 0o077) !== 0) {
    out.push(
      fail(
        'node_identity',
        `${id.file} is ${octal(id.fact.mode)}: the node JWT in it is readable by other users`,
        `chmod 600 ${id.file}`,
      ),
    );
  } else {
    out.push(
      ok('node_identity', `${id.identity.hostname} (${id.identity.node_id}) in ${id.file} (${id.why})`),
    );
  }

  const health = f.tower.health;
  const towerUp = health.ok && health.status === 200;
  if (towerUp) out.push(ok('tower', `${f.tower.url} answers /healthz (from the ${f.tower.source})`));
  else {
    const why = probeError(health) ?? problemText(health as HttpProbe & { ok: true });
    out.push(
      fail(
        'tower',
        `${f.tower.url} (from the ${f.tower.source}) is not healthy: ${why}`,
        'start the tower ("svc tower serve" or "svc up") or point the node at the right URL (--url / SVC_BASE_URL, then re-register)',
      ),
    );
  }

  if (!id.identity) out.push(warn('tower_auth', 'not checked: no node identity', register));
  else if (!towerUp)
    out.push(warn('tower_auth', 'not checked: the tower is not reachable', 'repair "tower" first'));
  else if (f.nodeAuth?.ok && f.nodeAuth.status === 200) {
    out.push(ok('tower_auth', `the tower accepts the JWT of node ${id.identity.node_id}`));
  } else {
    const p = f.nodeAuth;
    const why = !p ? 'not probed' : p.ok ? problemText(p) : p.error;
    const rejected = p?.ok && (p.status === 401 || p.status === 403 || p.status === 404);
    out.push(
      fail(
        'tower_auth',
        rejected
          ? `the tower rejects the node JWT in ${id.file} (${why}): revoked, rotated or from another tower`
          : `could not check the node JWT: ${why}`,
        `svc agent node register --hostname ${id.identity.hostname} --force (rotates the JWT), then restart svcd`,
      ),
    );
  }

  const op = f.operator;
  const login = 'svc login --url URL --token TOKEN, or set SVC_TOKEN';
  if (op.error) out.push(fail('operator_auth', op.error, login));
  else if (!op.hasToken) {
    out.push(
      warn('operator_auth', 'no operator credential (svc commands that call the tower will fail)', login),
    );
  } else if (!op.probe) out.push(warn('operator_auth', 'not checked: no tower URL', login));
  else if (!op.probe.ok) {
    out.push(
      warn(
        'operator_auth',
        `not checked: ${op.url} is not reachable (${op.probe.error})`,
        'start the tower or fix --url / SVC_BASE_URL',
      ),
    );
  } else if (op.probe.status === 200) out.push(ok('operator_auth', `${op.url} accepts the operator token`));
  else if (op.probe.status === 403) {
    out.push(
      warn('operator_auth', `the operator token lacks the feed:read scope (${problemText(op.probe)})`, login),
    );
  } else {
    out.push(fail('operator_auth', `${op.url} rejects the operator token (${problemText(op.probe)})`, login));
  }
  return out;
}

function daemonChecks(f: DoctorFacts): Check[] {
  const s = f.daemon.status;
  if (!s) {
    const why = f.daemon.error ?? 'mgmt.sock does not answer';
    return [
      warn('daemon', `svcd is not running (${why})`, 'svc daemon up'),
      warn('control_channel', 'not checked: svcd is not running', 'svc daemon up'),
    ];
  }
  const out: Check[] = [
    ok('daemon', `svcd ${String(s.version)} pid ${String(s.pid)}, up ${String(s.uptime_seconds)} s`),
  ];
  const comps = (s.components ?? {}) as Record<string, Record<string, unknown> | undefined>;
  const control = comps.control;
  const tower = s.tower as { connected?: unknown } | undefined;
  const connected = control?.connected ?? tower?.connected;
  const connects = typeof control?.connects === 'number' ? control.connects : null;
  const reconnects = connects === null ? '' : `, ${Math.max(0, connects - 1)} reconnects since start`;
  if (connected === true) {
    const since = typeof control?.connected_since === 'string' ? ` since ${control.connected_since}` : '';
    out.push(ok('control_channel', `connected to ${String(s.backend_url)}${since}${reconnects}`));
  } else {
    const last = typeof control?.last_error === 'string' ? `: ${control.last_error}` : '';
    out.push(
      warn(
        'control_channel',
        `svcd is not connected to ${String(s.backend_url)}${last}${reconnects} (it retries with backoff)`,
        'repair "tower" and "tower_auth"; svcd reconnects by itself',
      ),
    );
  }
  out.push(stateDbCheck(comps));
  return out;
}

/**
 * Whether svcd can write state.db: cron skips its due fires while it cannot (a dedup key that
 * is not durable could fire twice), and the outbox holds events in memory.
 */
function stateDbCheck(comps: Record<string, Record<string, unknown> | undefined>): Check {
  const hint =
    'free space on the file system of state.db (or make it writable again); svcd resumes by itself, no restart';
  const cron = comps.cron?.state_error as
    | { file?: unknown; since?: unknown; detail?: unknown; skipped_fires?: unknown }
    | null
    | undefined;
  if (cron) {
    return fail(
      'state_db',
      `${String(cron.file)} cannot be written since ${String(cron.since)} (${String(cron.detail)}): ${String(cron.skipped_fires)} cron fires skipped, none fired twice`,
      hint,
    );
  }
  const outbox = comps.outbox;
  if (typeof outbox?.state_error === 'string') {
    return warn(
      'state_db',
      `state.db refuses events (${outbox.state_error}): ${String(outbox.held_in_memory)} held in memory until the tower has them`,
      hint,
    );
  }
  return ok('state_db', 'svcd writes state.db');
}

function socketCheck(f: DoctorFacts): Check {
  const name = 'sockets';
  const restart = 'svc daemon down && svc daemon up (svcd recreates its sockets 0600)';
  const d = f.svcdDir;
  if (d.kind === 'missing') {
    return f.daemon.status
      ? fail(name, `${d.path} is missing while svcd runs`, restart)
      : ok(name, `${d.path} not created yet (svcd has not run)`);
  }
  const problems: string[] = [];
  const fixes: string[] = [];
  if (d.kind !== 'dir') problems.push(`${d.path} is not a directory`);
  else if (d.mode !== null && (d.mode & 0o077) !== 0) {
    problems.push(`${d.path} is ${octal(d.mode)}`);
    fixes.push(`chmod 700 ${d.path}`);
  }
  if (d.uid !== null && d.uid !== f.uid) problems.push(`${d.path} belongs to uid ${d.uid}`);
  const present = f.sockets.filter((s) => s.kind !== 'missing');
  for (const s of present) {
    if (s.kind !== 'socket') problems.push(`${s.path} is not a socket`);
    else if (s.mode !== null && (s.mode & 0o077) !== 0) {
      problems.push(`${s.path} is ${octal(s.mode)}`);
      fixes.push(`chmod 600 ${s.path}`);
    }
    if (s.uid !== null && s.uid !== f.uid) problems.push(`${s.path} belongs to uid ${s.uid}`);
  }
  if (f.daemon.status) {
    for (const s of f.sockets)
      if (s.kind === 'missing') problems.push(`${s.path} is missing while svcd runs`);
  }
  if (problems.length) {
    return fail(
      name,
      `${problems.join('; ')} (should be: directory 0700, sockets 0600, owned by uid ${f.uid})`,
      fixes.length ? `${fixes.join(' && ')}, or ${restart}` : restart,
    );
  }
  const names = present.map((s) => s.path.slice(s.path.lastIndexOf('/') + 1));
  return ok(
    name,
    names.length
      ? `${d.path} 0700; ${names.join(', ')} 0600`
      : `${d.path} 0700; no sockets (svcd not running)`,
  );
}

const TOOL_USE: Record<string, string> = {
  bash: 'cron "bash" jobs and "run:" commands',
  git: 'task worktrees',
  tmux: 'mux_hosted agents',
};

function toolChecks(f: DoctorFacts): Check[] {
  const out = f.tools.map((t) =>
    t.path
      ? ok(`tool:${t.name}`, t.path)
      : fail(
          `tool:${t.name}`,
          `${t.name} is not on PATH (needed for ${TOOL_USE[t.name] ?? 'svcd'})`,
          `install ${t.name} (e.g. apt-get install ${t.name}) or add its directory to PATH`,
        ),
  );
  const sc = f.systemctl;
  const detached = 'svc daemon up starts svcd detached and agents use the process backend';
  if (!sc.path) {
    out.push(
      warn(
        'systemctl_user',
        `systemctl is not on PATH: ${detached}`,
        'fine without systemd; to use it install systemd',
      ),
    );
  } else if (!sc.userBus) {
    out.push(
      warn(
        'systemctl_user',
        `no systemd user bus (DBUS_SESSION_BUS_ADDRESS, $XDG_RUNTIME_DIR/bus): ${detached}`,
        'log in through a systemd session or run "loginctl enable-linger $USER"',
      ),
    );
  } else if (sc.result && (sc.result.out === 'running' || sc.result.out === 'degraded')) {
    out.push(ok('systemctl_user', `systemctl --user reports the user manager ${sc.result.out}`));
  } else {
    const what = sc.result ? `${sc.result.out || 'no output'} (exit ${sc.result.code})` : 'did not run';
    out.push(
      warn(
        'systemctl_user',
        `systemctl --user is-system-running: ${what}`,
        'check "systemctl --user status"; svc daemon up --no-systemd starts svcd without it',
      ),
    );
  }
  return out;
}

export function runChecks(f: DoctorFacts): Check[] {
  const skillsWhat = f.skillsHome.fromEnv ? 'SVC_SKILLS_HOME' : 'SVC_SKILLS_HOME default, $SVC_HOME/skills';
  const agentHint = 'run "svc system doctor --fix" to seed one';
  let agent: Check;
  if (f.agentId.error) {
    agent = fail(
      'agent_id',
      `${f.agentId.file}: ${f.agentId.error}`,
      `remove ${f.agentId.file}, then ${agentHint}`,
    );
  } else if (f.agentId.value) agent = ok('agent_id', `${f.agentId.value} (${f.agentId.file})`);
  else agent = warn('agent_id', `no local swarm agent_id yet (${f.agentId.file})`, agentHint);
  return [
    dirCheck('svc_home', f.home, 'SVC_HOME', true),
    dirCheck('svc_skills_home', f.skillsHome, skillsWhat, true),
    agent,
    ...nodeChecks(f),
    ...daemonChecks(f),
    socketCheck(f),
    ...toolChecks(f),
    feedCheck(f),
  ];
}
