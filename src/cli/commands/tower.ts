// `svc tower serve` runs the backend in the foreground (options from flags, else SVC_TOWER_*
// variables: ../tower-serve-config.ts); `svc tower install-unit` writes a systemd user unit
// that runs it; `svc tower keys` manages the node JWT signing keys.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { parseDuration } from '../../lib/duration.js';
import { type CommandDeps, globals } from '../deps.js';
import { print, table } from '../output.js';
import { type LogFlags, openProcessLog } from '../process-log.js';
import { UsageError } from '../run.js';
import { applyServeEnv, givenArgs, optionLabel, serveOptions } from '../tower-serve-config.js';
import { listenError, storeOpenError } from '../tower-start-errors.js';
import { installUserUnit, type UserUnit } from '../user-unit.js';

export function parseListen(listen: string, label = '--listen'): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(listen);
  const port = Number(m?.[2]);
  if (!m?.[1] || !Number.isInteger(port) || port > 65535) {
    throw new UsageError(
      `invalid ${label} "${listen}": expected HOST:PORT, e.g. 127.0.0.1:8008 (port 0 picks a free one)`,
    );
  }
  return { host: m[1].replace(/^\[|\]$/g, ''), port };
}

/** SVC_MESH_IN_FLIGHT: mesh lease-holding statements of one kind under way at once. */
export function parseMeshInFlight(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || n < 1) {
    throw new UsageError(`invalid SVC_MESH_IN_FLIGHT "${text}": expected a positive integer (default 4)`);
  }
  return n;
}

/** SVC_SEQ_GAP_MS: the feed sequencer's pause between busy passes (PostgreSQL), ms. */
export function parseSequencerGap(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || n < 1) {
    throw new UsageError(
      `invalid SVC_SEQ_GAP_MS "${text}": expected a positive integer of milliseconds (default 2)`,
    );
  }
  return n;
}

/** --advertise-url: an http(s) base URL, kept without a trailing slash. */
export function parseAdvertiseUrl(text: string, label: string): string {
  let u: URL | null = null;
  try {
    u = new URL(text);
  } catch {
    // reported below
  }
  if (!u || !/^https?:$/.test(u.protocol) || (u.pathname !== '/' && u.pathname !== '') || u.search) {
    throw new UsageError(`invalid ${label} "${text}": expected a base URL such as http://10.0.0.5:8008`);
  }
  return `${u.protocol}//${u.host}`;
}

/** A count option: a non-negative integer (`zero`: 0 allowed). */
export function parseCount(text: string, label: string, zero: boolean): number {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || (!zero && n < 1)) {
    throw new UsageError(
      `invalid ${label} "${text}": expected a ${zero ? 'non-negative' : 'positive'} integer`,
    );
  }
  return n;
}

/**
 * The listen backlog when none is given: what the kernel grants (net.core.somaxconn, read at
 * the edge), else the tower's default.
 */
export function defaultListenBacklog(
  read: (file: string) => string = (f) => readFileSync(f, 'utf8'),
): number {
  try {
    const n = Number(read('/proc/sys/net/core/somaxconn').trim());
    if (Number.isInteger(n) && n > 0) return n;
  } catch {
    // not Linux, or /proc not mounted
  }
  return 4096;
}

/** "600" (per minute), "600/1m", "100/10s", or "0" to disable. */
export function parseRateLimit(text: string, label = '--rate-limit'): { limit: number; windowMs: number } {
  const m = /^(\d+)(?:\/(.+))?$/.exec(text.trim());
  if (!m) throw new UsageError(`invalid ${label} "${text}": expected N or N/<duration>, e.g. 600/1m`);
  try {
    return { limit: Number(m[1]), windowMs: m[2] ? parseDuration(m[2]) : 60_000 };
  } catch (e) {
    throw new UsageError(`invalid ${label} "${text}": ${(e as Error).message}`);
  }
}

export const TOWER_UNIT = 'svc-tower.service';
const SVC_BIN = fileURLToPath(new URL('../svc.js', import.meta.url));

/** The tower's user unit: `svc tower serve ARGS`, its environment from tower.env in SVC_HOME. */
export function towerUnit(o: {
  home: string;
  userHome: string;
  args: string[];
  nodeBin?: string;
  svcBin?: string;
}): UserUnit {
  return {
    description: 'svc tower: the svc backend (REST, feed, console)',
    home: o.home,
    userHome: o.userHome,
    envFile: 'tower.env',
    exec: [o.nodeBin ?? process.execPath, o.svcBin ?? SVC_BIN, 'tower', 'serve', ...o.args],
  };
}

interface ServeFlags extends LogFlags {
  listen: string;
  listenBacklog?: string;
  maxNodeChannels: string;
  maxConnectsInFlight: string;
  advertiseUrl?: string;
  database?: string;
  dataDir?: string;
  tlsCert?: string;
  tlsKey?: string;
  oidcIssuer?: string;
  oidcAudience?: string;
  oidcDomainsClaim?: string;
  oidcJwksCooldown?: string;
  rateLimit?: string;
  authFailureLimit?: string;
  eventRetention?: string;
  wsCompression?: boolean;
  requestDeadline: string;
  storeConnectTimeout: string;
  storeStatementTimeout: string;
  storeBusyTimeout: string;
}

/** A duration option in ms; "0" allowed only where it means "no limit". */
function durationFlag(flag: string, text: string, zero: boolean): number {
  if (zero && text.trim() === '0') return 0;
  try {
    const ms = parseDuration(text);
    if (ms > 0) return ms;
  } catch {
    // reported below
  }
  throw new UsageError(
    `invalid ${flag} "${text}": expected a duration such as 500ms, 5s or 1m${zero ? ', or 0' : ''}`,
  );
}

export function registerTower(program: Command, deps: CommandDeps): void {
  const tower = program.command('tower').description('run and administer the tower (the backend)');

  serveOptions(
    tower
      .command('serve')
      .description('run the tower in the foreground (SQLite in $SVC_HOME/tower unless --database)'),
  ).action(async (_o, cmd: Command) => {
    const env = deps.io.env;
    applyServeEnv(cmd, env);
    const flags = cmd.opts() as ServeFlags;
    const label = (long: string) => optionLabel(cmd, long);
    const { host, port } = parseListen(flags.listen, label('--listen'));
    const requestDeadlineMs = durationFlag(label('--request-deadline'), flags.requestDeadline, false);
    const storeTimeouts = {
      connectTimeoutMs: durationFlag(label('--store-connect-timeout'), flags.storeConnectTimeout, false),
      statementTimeoutMs: durationFlag(label('--store-statement-timeout'), flags.storeStatementTimeout, true),
    };
    const busyTimeoutMs = durationFlag(label('--store-busy-timeout'), flags.storeBusyTimeout, true);
    const listenBacklog =
      flags.listenBacklog === undefined
        ? defaultListenBacklog()
        : parseCount(flags.listenBacklog, label('--listen-backlog'), false);
    const maxNodeChannels = parseCount(flags.maxNodeChannels, label('--max-node-channels'), true);
    const maxConnectsInFlight = parseCount(
      flags.maxConnectsInFlight,
      label('--max-connects-in-flight'),
      true,
    );
    const advertiseUrl =
      flags.advertiseUrl === undefined
        ? undefined
        : parseAdvertiseUrl(flags.advertiseUrl, label('--advertise-url'));
    if (Boolean(flags.tlsCert) !== Boolean(flags.tlsKey)) {
      throw new UsageError('--tls-cert and --tls-key go together');
    }
    if (Boolean(flags.oidcIssuer) !== Boolean(flags.oidcAudience)) {
      throw new UsageError('--oidc-issuer and --oidc-audience go together');
    }
    // Loaded here, not at the top: every other svc command starts without the tower's code
    // (Fastify, Kysely, database drivers), which is most of svc's start-up time.
    const { createTower } = await import('../../tower/tower.js');
    const { log, close: closeLog } = await openProcessLog(flags, {
      name: 'tower',
      stderrIsTTY: deps.io.stderrIsTTY?.() === true,
      label,
    });
    const tls =
      flags.tlsCert && flags.tlsKey
        ? { cert: readFileSync(flags.tlsCert), key: readFileSync(flags.tlsKey) }
        : undefined;
    const dataDir = flags.dataDir ?? deps.io.paths.towerDir;
    let tower: Awaited<ReturnType<typeof createTower>>;
    try {
      tower = await createTower({
        database: flags.database,
        dataDir,
        log,
        ...(env.SVC_MASTER_KEY ? { masterKey: env.SVC_MASTER_KEY } : {}),
        ...(tls ? { tls } : {}),
        ...(flags.oidcIssuer && flags.oidcAudience
          ? {
              oidc: {
                issuer: flags.oidcIssuer,
                audience: flags.oidcAudience,
                domainsClaim: flags.oidcDomainsClaim,
                jwksCooldownMs:
                  flags.oidcJwksCooldown === '0' ? 0 : parseDuration(flags.oidcJwksCooldown ?? '30s'),
              },
            }
          : {}),
        rateLimit: parseRateLimit(flags.rateLimit ?? '6000/1m', label('--rate-limit')),
        authFailureLimit: parseRateLimit(flags.authFailureLimit ?? '120/1m', label('--auth-failure-limit')),
        eventRetentionMs: parseDuration(flags.eventRetention ?? '7d'),
        wsCompression: flags.wsCompression === true,
        requestDeadlineMs,
        storeTimeouts,
        busyTimeoutMs,
        listenBacklog,
        maxNodeChannels,
        maxConnectsInFlight,
        ...(advertiseUrl ? { advertiseUrl } : {}),
        ...(env.SVC_MESH_IN_FLIGHT ? { meshInFlight: parseMeshInFlight(env.SVC_MESH_IN_FLIGHT) } : {}),
        ...(env.SVC_SCHEMA_PACK_FILE ? { schemaPackFile: env.SVC_SCHEMA_PACK_FILE } : {}),
        ...(env.SVC_SEQ_GAP_MS ? { sequencerGapMs: parseSequencerGap(env.SVC_SEQ_GAP_MS) } : {}),
      });
    } catch (e) {
      throw storeOpenError(e, flags.database, dataDir);
    }
    let url: string;
    try {
      url = await tower.listen(host, port);
    } catch (e) {
      await tower.stop();
      throw listenError(flags.listen, e);
    }
    // Signal handlers go in before the line that tells a supervisor (or a test) the tower
    // is up: a SIGTERM right after that line must shut down cleanly, not kill the process.
    const stopped = new Promise<void>((resolve) => {
      const onSignal = (sig: string) => {
        log.info({ signal: sig }, 'shutting down');
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
        void tower.stop().then(resolve);
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    });
    deps.io.out(`svc tower listening on ${url} (${tower.store.describe})`);
    await stopped;
    closeLog();
  });

  serveOptions(
    tower
      .command('install-unit')
      .description(
        'write a systemd user unit that runs "svc tower serve" with the options given here, and print how to enable it',
      ),
  ).action(async (_o, cmd: Command) => {
    const env = deps.io.env;
    // Checked now, not at the unit's first start.
    parseListen(cmd.opts<ServeFlags>().listen);
    const args = givenArgs(cmd);
    const home = deps.io.paths.home;
    const { unitFile, envFile } = await installUserUnit(
      env,
      TOWER_UNIT,
      towerUnit({ home, userHome: env.HOME || homedir(), args }),
      'Environment of the svc-tower user unit: SVC_TOWER_* options, SVC_MASTER_KEY',
    );
    const next = [
      'systemctl --user daemon-reload',
      `systemctl --user enable --now ${TOWER_UNIT}`,
      'loginctl enable-linger "$USER"   # keep it running after logout',
    ];
    const out = { unit_file: unitFile, env_file: envFile, args, next };
    print(deps.io, Boolean(globals(cmd).json), out, () =>
      [
        `wrote ${unitFile}`,
        `options and secrets (a --database password, SVC_MASTER_KEY) go in ${envFile}, as SVC_TOWER_* lines`,
        '',
        'enable it with:',
        ...next.map((c) => `  ${c}`),
      ].join('\n'),
    );
  });

  const keys = tower.command('keys').description('node JWT signing keys');
  keys
    .command('list')
    .description('list signing keys')
    .action(async (_o, cmd: Command) => {
      const client = await deps.client(cmd);
      const res = await client.get<{
        items: { kid: string; created_at: string; retired_at: string | null; active: boolean }[];
      }>('/admin/signing-keys');
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        table(res.items, [
          { header: 'kid', get: (k) => k.kid },
          { header: 'created', get: (k) => k.created_at },
          { header: 'signing', get: (k) => (k.active ? 'yes' : '') },
        ]),
      );
    });
  keys
    .command('rotate')
    .description('add a new signing key; new node JWTs are signed with it, old ones keep verifying')
    .action(async (_o, cmd: Command) => {
      const res = await (await deps.client(cmd)).post<{ kid: string }>('/admin/signing-keys/rotate');
      print(deps.io, Boolean(globals(cmd).json), res, () => `new signing key ${res.kid}`);
    });
  keys
    .command('retire <kid>')
    .description('stop accepting node JWTs signed with this key')
    .action(async (kid: string, _o, cmd: Command) => {
      const res = await (await deps.client(cmd)).post(
        `/admin/signing-keys/${encodeURIComponent(kid)}/retire`,
      );
      print(deps.io, Boolean(globals(cmd).json), res, () => `retired ${kid}`);
    });
}
