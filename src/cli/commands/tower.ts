// `svc tower serve` runs the backend in the foreground; `svc tower keys` manages the node
// JWT signing keys.
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { parseDuration } from '../../lib/duration.js';
import { SvcError } from '../../protocol/errors.js';
import { type CommandDeps, globals } from '../deps.js';
import { print, table } from '../output.js';
import { UsageError } from '../run.js';

export function parseListen(listen: string): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(listen);
  const port = Number(m?.[2]);
  if (!m?.[1] || !Number.isInteger(port) || port > 65535) {
    throw new UsageError(
      `invalid --listen "${listen}": expected HOST:PORT, e.g. 127.0.0.1:8008 (port 0 picks a free one)`,
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

/** "600" (per minute), "600/1m", "100/10s", or "0" to disable. */
export function parseRateLimit(text: string): { limit: number; windowMs: number } {
  const m = /^(\d+)(?:\/(.+))?$/.exec(text.trim());
  if (!m) throw new UsageError(`invalid --rate-limit "${text}": expected N or N/<duration>, e.g. 600/1m`);
  try {
    return { limit: Number(m[1]), windowMs: m[2] ? parseDuration(m[2]) : 60_000 };
  } catch (e) {
    throw new UsageError(`invalid --rate-limit "${text}": ${(e as Error).message}`);
  }
}

interface ServeFlags {
  listen: string;
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
  logLevel: string;
}

/** A duration flag in ms; "0" allowed only where it means "no limit". */
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

  tower
    .command('serve')
    .description('run the tower in the foreground (SQLite in $SVC_HOME/tower unless --database)')
    .option('--listen <host:port>', 'address to listen on', '127.0.0.1:8008')
    .option('--database <url>', 'postgres://user@host:5432/db[?schema=NAME] (default: embedded SQLite)')
    .option('--data-dir <dir>', 'tower data directory (default: $SVC_HOME/tower)')
    .option('--tls-cert <file>', 'PEM certificate: serve HTTPS')
    .option('--tls-key <file>', 'PEM private key for --tls-cert')
    .option('--oidc-issuer <url>', 'accept OIDC JWTs from this issuer (JWKS discovered)')
    .option('--oidc-audience <aud>', 'required audience of OIDC JWTs')
    .option('--oidc-domains-claim <name>', 'claim listing the domains of an OIDC user', 'svc_domains')
    .option('--oidc-jwks-cooldown <duration>', 'minimum time between JWKS refetches', '30s')
    .option('--rate-limit <n[/window]>', 'requests per principal per window (0 = off)', '6000/1m')
    .option(
      '--auth-failure-limit <n[/window]>',
      'failed authentications per client address per window; past it the address gets 429 before any credential is checked (0 = off)',
      '120/1m',
    )
    .option('--event-retention <duration>', 'how long feed events are kept', '7d')
    .option(
      '--ws-compression',
      'allow per-message deflate on /events/ws for clients that ask (costs memory per connection)',
    )
    .option(
      '--request-deadline <duration>',
      'answer every request within this; a store too slow or down answers 503 with Retry-After',
      '15s',
    )
    .option(
      '--store-connect-timeout <duration>',
      'PostgreSQL: connect, or wait for a pooled connection',
      '5s',
    )
    .option(
      '--store-statement-timeout <duration>',
      'PostgreSQL: statement_timeout of every request statement (0 = none)',
      '10s',
    )
    .option(
      '--store-busy-timeout <duration>',
      "SQLite: wait this long for another process's write lock",
      '5s',
    )
    .option('--log-level <level>', 'trace|debug|info|warn|error', 'info')
    .action(async (flags: ServeFlags) => {
      const { host, port } = parseListen(flags.listen);
      const requestDeadlineMs = durationFlag('--request-deadline', flags.requestDeadline, false);
      const storeTimeouts = {
        connectTimeoutMs: durationFlag('--store-connect-timeout', flags.storeConnectTimeout, false),
        statementTimeoutMs: durationFlag('--store-statement-timeout', flags.storeStatementTimeout, true),
      };
      const busyTimeoutMs = durationFlag('--store-busy-timeout', flags.storeBusyTimeout, true);
      if (Boolean(flags.tlsCert) !== Boolean(flags.tlsKey)) {
        throw new UsageError('--tls-cert and --tls-key go together');
      }
      if (Boolean(flags.oidcIssuer) !== Boolean(flags.oidcAudience)) {
        throw new UsageError('--oidc-issuer and --oidc-audience go together');
      }
      const env = deps.io.env;
      // Loaded here, not at the top: every other svc command starts without the tower's code
      // (Fastify, Kysely, database drivers), which is most of svc's start-up time.
      const [{ createLogger }, { createTower }] = await Promise.all([
        import('../../lib/log.js'),
        import('../../tower/tower.js'),
      ]);
      const log = createLogger({ level: flags.logLevel, name: 'tower' });
      const tls =
        flags.tlsCert && flags.tlsKey
          ? { cert: readFileSync(flags.tlsCert), key: readFileSync(flags.tlsKey) }
          : undefined;
      const tower = await createTower({
        database: flags.database ?? env.SVC_DATABASE_URL,
        dataDir: flags.dataDir ?? deps.io.paths.towerDir,
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
        rateLimit: parseRateLimit(flags.rateLimit ?? '6000/1m'),
        authFailureLimit: parseRateLimit(flags.authFailureLimit ?? '120/1m'),
        eventRetentionMs: parseDuration(flags.eventRetention ?? '7d'),
        wsCompression: flags.wsCompression === true,
        requestDeadlineMs,
        storeTimeouts,
        busyTimeoutMs,
        ...(env.SVC_MESH_IN_FLIGHT ? { meshInFlight: parseMeshInFlight(env.SVC_MESH_IN_FLIGHT) } : {}),
      });
      let url: string;
      try {
        url = await tower.listen(host, port);
      } catch (e) {
        await tower.stop();
        throw new SvcError('unavailable', `cannot listen on ${flags.listen}: ${(e as Error).message}`);
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
      deps.io.out(`svc tower listening on ${url} (${tower.ctx.store.describe})`);
      await stopped;
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
