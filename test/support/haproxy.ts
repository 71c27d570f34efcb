// A real HAProxy (the Debian package) in front of tower replicas, for e2e tests and
// bench/fleet: round-robin, WebSockets passed through, each replica health-checked on /readyz.
// It listens on a free port picked here (HAProxy cannot report a port 0 it was given), writes
// its config and admin socket into the caller's directory, runs in the foreground as a child of
// this process and is killed by stop().
//
// Only node: imports and erasable TypeScript: bench/fleet (plain .mjs) imports this file as is
// (Node's type stripping), so the tests and the benchmark drive the same load balancer.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';

export const HAPROXY_BIN = '/usr/sbin/haproxy';

export interface Backend {
  /** Server name in HAProxy (r0, r1, …). */
  name: string;
  host: string;
  port: number;
}

export interface HaproxyOptions {
  /** Directory for haproxy.cfg and the admin socket (the test's temp dir). */
  dir: string;
  /** Tower replicas, as http://host:port URLs. */
  backends: string[];
  /** Health check interval (ms); a replica is out after 3 failed checks, back after 1 good one. */
  checkIntervalMs?: number;
  /**
   * Connections HAProxy accepts at once (global maxconn); default: what the file-descriptor
   * limit allows (HAProxy works it out, two descriptors per proxied connection).
   */
  maxConn?: number;
  /**
   * http (default): HAProxy reads every request and response, and balances each request;
   * tcp: it balances connections and passes their bytes untouched (a client's keep-alive
   * connection stays on one replica). docs/operations.md says what each costs a large feed.
   */
  mode?: 'http' | 'tcp';
}

export interface ServerState {
  name: string;
  /** UP, DOWN, MAINT, … as HAProxy's `show stat` says. */
  status: string;
  /** Connections to that server now. */
  current: number;
  /** Connections made to that server since start. */
  total: number;
}

export interface Haproxy {
  /** http://127.0.0.1:PORT of the frontend. */
  url: string;
  backends: Backend[];
  child: ChildProcess;
  /** One command on the admin socket (`disable server towers/r0`, `show stat`, …). */
  admin(command: string): Promise<string>;
  servers(): Promise<ServerState[]>;
  /** Resolves once every backend is UP (or throws after timeoutMs). */
  waitAllUp(timeoutMs?: number): Promise<void>;
  stderr(): string;
  stop(): Promise<void>;
}

/** Whether the haproxy binary is installed (.ci/run installs the Debian package). */
export function haproxyInstalled(): boolean {
  return spawnSync(HAPROXY_BIN, ['-v'], { stdio: 'ignore' }).status === 0;
}

/** A port free now (HAProxy then binds it; a lost race fails its start, and start retries). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

function parseBackends(urls: string[]): Backend[] {
  return urls.map((u, i) => {
    const url = new URL(u);
    return { name: `r${i}`, host: url.hostname, port: Number(url.port) };
  });
}

export function haproxyConfig(o: {
  port: number;
  socket: string;
  backends: Backend[];
  checkIntervalMs: number;
  maxConn: number | null;
  mode?: 'http' | 'tcp';
}): string {
  const maxconn = o.maxConn === null ? '' : `  maxconn ${o.maxConn}\n`;
  const tcp = o.mode === 'tcp';
  return `global
${maxconn}  stats socket ${o.socket} mode 600 level admin
  # The tests own this process: no chroot, no daemon, no syslog.
  log stderr format raw local0 err
  # Short tasks (a new connection, a request) run between the transfers of busy streams
  # instead of after all of them: with 5 000 SSE streams being written, a POST through
  # HAProxy took 2.3 s p50 without it and 1.3 s with it (docs/perf-notes.md, feed-fleet).
  tune.sched.low-latency on

defaults
  mode ${tcp ? 'tcp' : 'http'}
  log global
  option dontlognull
  # A replica refusing a connection (killed) sends the request to another one at once.
  option redispatch 1
  retries 3
  timeout connect 2s
  # A loaded machine (2 cores, many processes) can answer /readyz late: slow is not down.
  timeout check 5s
  timeout client 1h
  timeout server 1h
  # Open WebSockets (control channels, attach, /events/ws) and long SSE responses.
  timeout tunnel 1h
${
  tcp
    ? ''
    : `  timeout http-request 10s
  # Longer than clients keep idle connections, so HAProxy is rarely the side closing one that a
  # client is about to reuse.
  timeout http-keep-alive 75s
`
}${maxconn}
frontend towers_in
  # The kernel caps it at net.core.somaxconn.
  bind 127.0.0.1:${o.port} backlog 4096
  default_backend towers

backend towers
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter ${o.checkIntervalMs} fall 3 rise 1
${o.backends.map((b) => `  server ${b.name} ${b.host}:${b.port} check`).join('\n')}
`;
}

function adminCommand(socket: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = connect(socket);
    let out = '';
    c.setEncoding('utf8');
    c.on('data', (d: string) => {
      out += d;
    });
    c.once('error', reject);
    c.once('end', () => resolve(out));
    c.end(`${command}\n`);
  });
}

/** `show stat` CSV → the backend's servers. */
export function parseServers(csv: string): ServerState[] {
  const lines = csv.split('\n').filter((l) => l.length > 0);
  const header = (lines[0] ?? '').replace(/^# /, '').split(',');
  const col = (name: string) => header.indexOf(name);
  const out: ServerState[] = [];
  for (const line of lines.slice(1)) {
    const f = line.split(',');
    if (f[col('pxname')] !== 'towers') continue;
    const name = f[col('svname')] ?? '';
    if (name === 'BACKEND' || name === 'FRONTEND') continue;
    out.push({
      name,
      status: f[col('status')] ?? '',
      current: Number(f[col('scur')]),
      total: Number(f[col('stot')]),
    });
  }
  return out;
}

async function startOnce(o: HaproxyOptions): Promise<Haproxy> {
  const port = await freePort();
  const socket = join(o.dir, 'haproxy.sock');
  const backends = parseBackends(o.backends);
  const cfg = join(o.dir, 'haproxy.cfg');
  writeFileSync(
    cfg,
    haproxyConfig({
      port,
      socket,
      backends,
      checkIntervalMs: o.checkIntervalMs ?? 500,
      maxConn: o.maxConn ?? null,
      mode: o.mode ?? 'http',
    }),
  );
  // -db: foreground, no daemon; -W would add a master process we would have to reap too.
  const child = spawn(HAPROXY_BIN, ['-db', '-f', cfg], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (d: string) => {
    err += d;
  });
  const exited = new Promise<number | string>((r) => {
    child.once('exit', (code, signal) => r(code ?? signal ?? -1));
  });
  let gone: number | string | null = null;
  void exited.then((c) => {
    gone = c;
  });
  const admin = (command: string) => adminCommand(socket, command);
  const servers = async () => parseServers(await admin('show stat'));
  const lb: Haproxy = {
    url: `http://127.0.0.1:${port}`,
    backends,
    child,
    admin,
    servers,
    async waitAllUp(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (gone !== null) throw new Error(`haproxy exited (${gone}): ${err.trim()}`);
        const s = await servers().catch(() => []);
        if (s.length === backends.length && s.every((x) => x.status === 'UP')) return;
        if (Date.now() > deadline) {
          throw new Error(`haproxy: backends not all UP: ${JSON.stringify(s)} ${err.trim()}`);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    stderr: () => err,
    async stop() {
      if (gone === null) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
  return lb;
}

/** Starts HAProxy in front of `backends` and waits until it serves with every backend UP. */
export async function startHaproxy(o: HaproxyOptions): Promise<Haproxy> {
  let last: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const lb = await startOnce(o);
    try {
      await lb.waitAllUp();
      return lb;
    } catch (e) {
      last = e;
      await lb.stop();
      // Another process took the port between freePort() and HAProxy's bind: pick again.
      if (!/cannot bind|Address already in use/i.test(lb.stderr())) break;
    }
  }
  throw last;
}
