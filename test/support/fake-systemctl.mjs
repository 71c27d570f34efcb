// A test double for `systemctl --user` (containers have no user bus): it records every call
// and runs user units the way the user manager would, from the unit file alone: ExecStart,
// Environment= and EnvironmentFile= (with %h), a minimal environment, the main pid kept in
// $FAKE_SYSTEMCTL_STATE/<unit>.pid. FAKE_SYSTEMCTL_FAIL=<verb> makes that verb fail.
// Usage: see installFakeSystemctl in fake-systemctl.ts.
import { spawn } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

const [scope, verb, ...units] = process.argv.slice(2);
const stateDir = process.env.FAKE_SYSTEMCTL_STATE;
appendFileSync(process.env.FAKE_SYSTEMCTL_LOG, `${process.argv.slice(2).join(' ')}\n`);
if (scope !== '--user') {
  process.stderr.write('fake systemctl: only --user is supported\n');
  process.exit(2);
}
if (process.env.FAKE_SYSTEMCTL_FAIL === verb) {
  process.stderr.write(`Failed to ${verb} ${units.join(' ')}: Unit failed (fake).\n`);
  process.exit(1);
}

const home = process.env.HOME || homedir();
const unitDir = join(process.env.XDG_CONFIG_HOME || join(home, '.config'), 'systemd', 'user');
const pidFile = (u) => join(stateDir, `${u}.pid`);

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function mainPid(u) {
  const pid = existsSync(pidFile(u)) ? Number(readFileSync(pidFile(u), 'utf8')) : 0;
  return pid && alive(pid) ? pid : 0;
}

/** systemd's command-line splitting: whitespace-separated words, "double quotes" with \ escapes. */
function words(line) {
  const out = [];
  const re = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (let m = re.exec(line); m; m = re.exec(line)) {
    out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2]);
  }
  return out;
}

function envFileEntries(path) {
  const env = {};
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const t = line.trim();
    if (!t || t.startsWith('#')) continue;
    const i = t.indexOf('=');
    if (i > 0) env[t.slice(0, i)] = t.slice(i + 1);
  }
  return env;
}

async function stop(u) {
  const pid = mainPid(u);
  if (pid) {
    process.kill(pid, 'SIGTERM');
    // TimeoutStopSec: like systemd, SIGKILL what has not exited after a while.
    const deadline = Date.now() + 15_000;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
  rmSync(pidFile(u), { force: true });
}

function start(u) {
  const file = join(unitDir, u);
  if (!existsSync(file)) {
    process.stderr.write(`Failed to start ${u}: Unit ${u} not found.\n`);
    process.exit(5);
  }
  // The user manager's own environment, not the caller's.
  const env = { PATH: process.env.PATH, HOME: home };
  let exec = null;
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.replaceAll('%h', home);
    if (line.startsWith('ExecStart=')) exec = words(line.slice('ExecStart='.length));
    else if (line.startsWith('Environment=')) {
      for (const w of words(line.slice('Environment='.length))) {
        const i = w.indexOf('=');
        env[w.slice(0, i)] = w.slice(i + 1);
      }
    } else if (line.startsWith('EnvironmentFile=')) {
      const path = line.slice('EnvironmentFile='.length).replace(/^-/, '');
      if (existsSync(path)) Object.assign(env, envFileEntries(path));
      else if (!line.slice('EnvironmentFile='.length).startsWith('-')) {
        process.stderr.write(`Failed to load environment files: ${path}: No such file\n`);
        process.exit(1);
      }
    }
  }
  const out = openSync(join(stateDir, `${u}.journal`), 'a');
  const child = spawn(exec[0], exec.slice(1), { env, detached: true, stdio: ['ignore', out, out] });
  writeFileSync(pidFile(u), String(child.pid));
  child.unref();
}

mkdirSync(stateDir, { recursive: true });
switch (verb) {
  case 'daemon-reload':
    break;
  case 'is-system-running':
    process.stdout.write('running\n');
    break;
  case 'start':
    for (const u of units) if (!mainPid(u)) start(u);
    break;
  case 'restart':
    for (const u of units) {
      await stop(u);
      start(u);
    }
    break;
  case 'stop':
    for (const u of units) await stop(u);
    break;
  case 'is-active': {
    let all = true;
    for (const u of units) {
      const active = mainPid(u) !== 0;
      all &&= active;
      process.stdout.write(`${active ? 'active' : 'inactive'}\n`);
    }
    process.exit(all ? 0 : 3);
    break;
  }
  case 'show':
    // show -p MainPID --value UNIT
    process.stdout.write(`${mainPid(units.at(-1))}\n`);
    break;
  default:
    process.stderr.write(`fake systemctl: unknown command ${verb}\n`);
    process.exit(1);
}
