// `svcd run`: the daemon in the foreground (what systemd and `svc daemon up` start).
import type { Command } from 'commander';
import { nodeFileForRead, readNodeIdentity } from '../../daemon/identity.js';
import { offsetClock, systemClock } from '../../lib/clock.js';
import { createLogger } from '../../lib/log.js';
import { checkBaseUrl, DEFAULT_BASE_URL } from '../../lib/url.js';
import { SvcError } from '../../protocol/errors.js';
import type { CliIO } from '../io.js';
import { VERSION } from '../version.js';

interface RunFlags {
  backendUrl?: string;
  boosterWasm?: string;
  logLevel: string;
}

export function registerSvcdRun(program: Command, io: CliIO): void {
  program
    .command('run')
    .description('run the daemon in the foreground')
    .option(
      '--backend-url <url>',
      'tower URL (default: SVC_BASE_URL, the node identity, http://127.0.0.1:8008)',
    )
    .option('--booster-wasm <path>', 'Wasm validation module run before every MCP tool call')
    .option('--log-level <level>', 'trace|debug|info|warn|error', 'info')
    .action(async (flags: RunFlags) => {
      const env = io.env;
      const identityFile = nodeFileForRead(env, io.paths.home);
      const identity = await readNodeIdentity(identityFile);
      let backendUrl: string;
      try {
        backendUrl = checkBaseUrl(
          flags.backendUrl ?? env.SVC_BASE_URL ?? identity.backend_url ?? DEFAULT_BASE_URL,
          env.SVC_ALLOW_INSECURE === '1',
        );
      } catch (e) {
        throw new SvcError('config_invalid', (e as Error).message);
      }
      const log = createLogger({ level: flags.logLevel, name: 'svcd' });
      const clockOffset = testClockOffset(env);
      if (clockOffset !== 0)
        log.warn({ offset_ms: clockOffset }, 'SVC_TEST_CLOCK_OFFSET_MS is set: test-only');
      // Loaded here, not at the top: `svcd get-secret`, which agents run often, starts fast.
      const { createDaemon } = await import('../../daemon/daemon.js');
      const daemon = await createDaemon({
        home: io.paths.home,
        backendUrl,
        identity,
        identityFile,
        env,
        log,
        version: VERSION,
        ...(clockOffset !== 0 ? { clock: offsetClock(systemClock, clockOffset) } : {}),
        ...(flags.boosterWasm ? { boosterWasm: flags.boosterWasm } : {}),
      });
      await daemon.start();
      // Signal handlers go in before the line that tells a supervisor (or a test) svcd is
      // up: a SIGTERM right after that line must shut down cleanly, not kill the process.
      const stopped = new Promise<void>((resolve) => {
        const onSignal = (signal: string) => {
          log.info({ signal }, 'shutting down');
          process.off('SIGTERM', onSignal);
          process.off('SIGINT', onSignal);
          void daemon.stop().then(resolve);
        };
        process.on('SIGTERM', onSignal);
        process.on('SIGINT', onSignal);
      });
      io.out(
        `svcd running (node ${identity.node_id}, tower ${backendUrl}, mgmt ${daemon.ctx.paths.mgmtSock})`,
      );
      await stopped;
    });
}

/** Test-only (docs/cron.md): shifts svcd's clock, e.g. to just before a minute boundary. */
function testClockOffset(env: NodeJS.ProcessEnv): number {
  const raw = env.SVC_TEST_CLOCK_OFFSET_MS;
  if (raw === undefined || raw === '') return 0;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) {
    throw new SvcError('config_invalid', `SVC_TEST_CLOCK_OFFSET_MS must be an integer (ms), not "${raw}"`);
  }
  return n;
}
