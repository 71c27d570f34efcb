// The options of `svc tower serve`, and where their values come from: the command line, else
// the environment (SVC_TOWER_<FLAG>, for containers and units), else the default. Every option
// gets its variable by name (--data-dir → SVC_TOWER_DATA_DIR), so an option added here is
// settable from the environment with no more code. The one place the tower's environment is
// read (with SVC_MASTER_KEY, read in commands/tower.ts).
import type { Command, Option } from 'commander';
import { logOptions } from './process-log.js';
import { UsageError } from './run.js';

/** Defines the serve options on `cmd` (`svc tower serve` and `svc tower install-unit`). */
export function serveOptions(cmd: Command): Command {
  return logOptions(
    cmd
      .option('--listen <host:port>', 'address to listen on', '127.0.0.1:8008')
      .option(
        '--listen-backlog <n>',
        'connections the kernel queues before the tower accepts them (capped by net.core.somaxconn; default: that cap, else 4096)',
      )
      .option(
        '--advertise-url <url>',
        'the URL other replicas reach this one at (default: the --listen address)',
      )
      .option(
        '--max-node-channels <n>',
        'node control channels this replica holds at most; past it a connect gets 503 with Retry-After (0 = no limit)',
        '0',
      )
      .option(
        '--max-connects-in-flight <n>',
        'node connects this replica handles at once (a reconnect storm); past it a connect gets 503 with Retry-After: 1 before any lookup (0 = no limit)',
        '256',
      )
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
      ),
  ).addHelpText(
    'after',
    '\nEvery option can also be set from the environment as SVC_TOWER_<OPTION> (--data-dir:\nSVC_TOWER_DATA_DIR; --ws-compression: SVC_TOWER_WS_COMPRESSION=1); a flag wins over its\nvariable. SVC_DATABASE_URL is also read for --database.',
  );
}

/** `--data-dir` → `SVC_TOWER_DATA_DIR`. */
export function towerEnvName(long: string): string {
  return `SVC_TOWER_${long.replace(/^--/, '').toUpperCase().replace(/-/g, '_')}`;
}

/** Variables read for an option, first set wins. */
function envNames(o: Option): string[] {
  const names = [towerEnvName(o.long ?? '')];
  if (o.long === '--database') names.push('SVC_DATABASE_URL');
  return names;
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off', '']);

/**
 * Sets each serve option not given on the command line from its variable, when set. Throws a
 * usage error naming the variable for a boolean that is neither yes nor no.
 */
export function applyServeEnv(cmd: Command, env: NodeJS.ProcessEnv): void {
  for (const o of cmd.options as Option[]) {
    if (!o.long || o.long === '--help') continue;
    const key = o.attributeName();
    if (cmd.getOptionValueSource(key) === 'cli') continue;
    const name = envNames(o).find((n) => env[n] !== undefined && (o.isBoolean() || env[n] !== ''));
    if (name === undefined) continue;
    const raw = env[name] as string;
    if (o.isBoolean()) {
      const v = raw.trim().toLowerCase();
      if (!TRUE.has(v) && !FALSE.has(v)) {
        throw new UsageError(`invalid ${name}="${raw}": use 1 or 0 (true/false, yes/no, on/off)`);
      }
      cmd.setOptionValueWithSource(key, TRUE.has(v), 'env');
    } else {
      cmd.setOptionValueWithSource(key, raw, 'env');
    }
  }
}

/** The options given on the command line, as arguments again (for a unit's ExecStart). */
export function givenArgs(cmd: Command): string[] {
  const args: string[] = [];
  for (const o of cmd.options as Option[]) {
    if (!o.long || o.long === '--help') continue;
    const key = o.attributeName();
    if (cmd.getOptionValueSource(key) !== 'cli') continue;
    const v = cmd.getOptionValue(key) as unknown;
    if (o.isBoolean()) {
      if (v === true) args.push(o.long);
    } else args.push(o.long, String(v));
  }
  return args;
}

/** How to name an option in an error: its flag, or the variable its value came from. */
export function optionLabel(cmd: Command, long: string): string {
  const o = (cmd.options as Option[]).find((x) => x.long === long);
  if (!o || cmd.getOptionValueSource(o.attributeName()) !== 'env') return long;
  return envNames(o)[0] as string;
}
