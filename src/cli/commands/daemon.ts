// `svc daemon …`: the local svcd. `status` asks mgmt.sock; `up` (also the short form `svc daemon
// --booster-wasm <path>`) starts svcd in the background (the systemd user unit when a user bus
// exists, else a detached process with a pid file and a log file) and waits until mgmt.sock
// answers; `down` stops it; `install-unit` writes the user unit (docs/operator-guide.md, 5 and
// 6). Starting and stopping are in ../svcd-process.ts.
import type { Command } from 'commander';
import { nodeFileForRead, readNodeIdentity } from '../../daemon/identity.js';
import { daemonPaths } from '../../daemon/paths.js';
import { systemClock } from '../../lib/clock.js';
import { DEFAULT_BASE_URL } from '../../lib/url.js';
import { type CommandDeps, globals } from '../deps.js';
import { mgmtCall } from '../mgmt-client.js';
import { keyValues, print } from '../output.js';
import { UsageError } from '../run.js';
import {
  chooseBooster,
  installSvcdUnit,
  readDaemonRecord,
  SVCD_UNIT,
  startSvcd,
  stopSvcd,
  svcdStatus,
  svcdUnit,
} from '../svcd-process.js';
import { renderUserUnit } from '../user-unit.js';

export const UNIT_NAME = SVCD_UNIT;

/** What daemon.metrics answers: the Prometheus text and prom-client's JSON of the same. */
interface DaemonMetricsResult {
  text: string;
  metrics: {
    name: string;
    type: string;
    values: { value: number; labels: Record<string, string | number>; metricName?: string }[];
  }[];
}

/** One `{name, type, labels, value}` per sample (histograms: their _bucket, _sum, _count). */
export function metricSamples(metrics: DaemonMetricsResult['metrics']) {
  return metrics.flatMap((m) =>
    m.values.map((v) => ({ name: v.metricName ?? m.name, type: m.type, labels: v.labels, value: v.value })),
  );
}

interface UpFlags {
  backendUrl?: string;
  /** A path, false for --no-booster-wasm, undefined when neither was given. */
  boosterWasm?: string | false;
  timeout: string;
  systemd: boolean;
}

/** The text of the svcd user unit (docs/operator-guide.md, 6); see svcd-process.ts svcdUnit. */
export function unitFile(o: Parameters<typeof svcdUnit>[0]): string {
  return renderUserUnit(svcdUnit(o));
}

export function registerDaemonCommands(daemon: Command, deps: CommandDeps): void {
  const home = () => deps.io.paths.home;
  const paths = () => daemonPaths(home());
  const status = () => svcdStatus(home());

  async function backendUrl(flag: string | undefined): Promise<string> {
    if (flag) return flag;
    const env = deps.io.env;
    if (env.SVC_BASE_URL) return env.SVC_BASE_URL;
    const id = await readNodeIdentity(nodeFileForRead(env, home()), { shared: 'report' }).catch(() => null);
    return id?.backend_url ?? DEFAULT_BASE_URL;
  }

  async function up(o: UpFlags, json: boolean): Promise<void> {
    const running = await status().catch(() => null);
    if (running) {
      const out = { already_running: true, pid: running.pid, mgmt_sock: paths().mgmtSock };
      const note =
        o.boosterWasm !== undefined
          ? '; to change --booster-wasm, restart it: svc daemon down, then svc daemon up --booster-wasm …'
          : '';
      print(deps.io, json, out, () => `svcd already running (pid ${running.pid})${note}`);
      return;
    }
    const url = await backendUrl(o.backendUrl);
    const timeoutMs = Number(o.timeout) * 1000;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new UsageError(`--timeout must be a positive number of seconds, not "${o.timeout}"`);
    }
    const booster = chooseBooster(o.boosterWasm, await readDaemonRecord(home()));
    const { record, status: s } = await startSvcd({
      home: home(),
      env: deps.io.env,
      url,
      boosterWasm: booster.path,
      systemd: o.systemd,
      timeoutMs,
      clock: systemClock,
    });
    const out = {
      pid: s.pid,
      mode: record.mode,
      backend_url: url,
      mgmt_sock: paths().mgmtSock,
      log: record.log,
      ...(booster.path ? { booster_wasm: booster.path, booster_from_last_start: booster.remembered } : {}),
    };
    print(deps.io, json, out, () =>
      [
        `svcd started (pid ${s.pid}, ${record.mode}, tower ${url})`,
        ...(booster.path
          ? [
              booster.remembered
                ? `booster ${booster.path}, as at the last start (--no-booster-wasm starts without it)`
                : `booster ${booster.path}`,
            ]
          : []),
      ].join('\n'),
    );
  }

  // The short form: `svc daemon --booster-wasm <path>` starts svcd with a Wasm validation
  // module. Without options `svc daemon` shows its commands. The option is the group's, so
  // commander also hands `svc daemon up --booster-wasm X` to it: `up` reads both.
  daemon
    .option('--booster-wasm <path>', 'start svcd with this Wasm validation module (as "svc daemon up")')
    .allowExcessArguments()
    .action(async (o: { boosterWasm?: string }, cmd: Command) => {
      if (cmd.args.length > 0) {
        throw new UsageError(`unknown command "svc daemon ${cmd.args[0]}" (see: svc daemon --help)`);
      }
      if (o.boosterWasm === undefined) {
        cmd.outputHelp();
        return;
      }
      await up({ boosterWasm: o.boosterWasm, timeout: '30', systemd: true }, Boolean(globals(cmd).json));
    });

  daemon
    .command('status')
    .description("the local svcd's version, uptime, tower connectivity and components")
    .action(async (_o, cmd: Command) => {
      const s = await status();
      print(deps.io, Boolean(globals(cmd).json), s, () => keyValues(s));
    });

  daemon
    .command('metrics')
    .description("the local svcd's Prometheus metrics (--json: one object per sample)")
    .action(async (_o, cmd: Command) => {
      const m = await mgmtCall<DaemonMetricsResult>(
        daemonPaths(deps.io.paths.home).mgmtSock,
        'daemon.metrics',
      );
      if (globals(cmd).json) deps.io.out(JSON.stringify(metricSamples(m.metrics), null, 2));
      else deps.io.out(m.text.trimEnd());
    });

  daemon
    .command('up')
    .description('start svcd in the background and wait until it answers on mgmt.sock')
    .option('--backend-url <url>', 'tower URL (default: SVC_BASE_URL, the node identity)')
    .option('--booster-wasm <path>', "Wasm validation module, passed to svcd run (default: the last start's)")
    .option('--no-booster-wasm', 'start without the booster of the last start')
    .option('--timeout <seconds>', 'how long to wait for mgmt.sock', '30')
    .option('--no-systemd', 'start a detached process even when a systemd user bus exists')
    .action(async (o: UpFlags, cmd: Command) => {
      // `svc daemon up --booster-wasm X` may land on the group's own option (see above).
      const group = (cmd.parent?.opts() ?? {}) as { boosterWasm?: string };
      const boosterWasm = o.boosterWasm ?? group.boosterWasm;
      await up({ ...o, ...(boosterWasm !== undefined ? { boosterWasm } : {}) }, Boolean(globals(cmd).json));
    });

  daemon
    .command('down')
    .description('stop the local svcd (SIGTERM; SIGKILL after --timeout)')
    .option('--timeout <seconds>', 'how long to wait for a clean exit', '15')
    .action(async (o: { timeout: string }, cmd: Command) => {
      const json = Boolean(globals(cmd).json);
      const out = await stopSvcd({
        home: home(),
        env: deps.io.env,
        timeoutMs: Number(o.timeout) * 1000,
        clock: systemClock,
      });
      print(deps.io, json, out, () =>
        out.stopped ? `svcd stopped${out.pid ? ` (pid ${out.pid})` : ''}` : 'svcd was not running',
      );
    });

  daemon
    .command('install-unit')
    .description('write the systemd user unit for svcd and print how to enable it')
    .option('--backend-url <url>', 'tower URL (default: SVC_BASE_URL, the node identity)')
    .option('--booster-wasm <path>', 'Wasm validation module, passed to svcd run')
    .action(async (o: { backendUrl?: string; boosterWasm?: string }, cmd: Command) => {
      const url = await backendUrl(o.backendUrl);
      const flag = o.boosterWasm ?? (cmd.parent?.opts() as { boosterWasm?: string } | undefined)?.boosterWasm;
      const booster = flag ? chooseBooster(flag, null).path : null;
      const { unitFile: file, envFile } = await installSvcdUnit(deps.io.env, home(), url, booster);
      const next = [
        'systemctl --user daemon-reload',
        `systemctl --user enable --now ${UNIT_NAME}`,
        'loginctl enable-linger "$USER"   # keep it running after logout',
      ];
      const out = { unit_file: file, env_file: envFile, backend_url: url, next };
      print(deps.io, Boolean(globals(cmd).json), out, () =>
        [`wrote ${file}`, '', 'enable it with:', ...next.map((c) => `  ${c}`)].join('\n'),
      );
    });
}
