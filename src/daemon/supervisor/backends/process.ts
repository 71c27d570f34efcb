// The process backend: svcd owns the agent as a child in its own process group (plain, in
// a pseudo-terminal, or as an ACP session over stdio). Output goes to the rotating log.
// The default where no user bus exists, and the only backend for ACP and PTY agents.
import type { Clock } from '../../../lib/clock.js';
import { type ExitInfo, reapOrphanGroup, spawnGroup, stopGroup } from '../../process/group.js';
import { RotatingLog } from '../../process/rotating-log.js';
import { PtyTerminal } from '../../process/terminal.js';
import { AcpSession } from '../../runtimes/acp-session.js';
import type { RunningUnit, UnitBackend } from './types.js';

export interface ProcessBackendDeps {
  clock: Clock;
  /** Real-time waits for process exit. */
  waits: Clock;
  stopGraceMs: () => number;
}

export function createProcessBackend(deps: ProcessBackendDeps): UnitBackend {
  return {
    kind: 'process',

    async start(l) {
      const log = new RotatingLog(l.logFile, l.rotation);
      log.mark(`start ${l.unit}: ${l.argv.join(' ')}`, deps.clock.now());
      const closeLog = (e: ExitInfo) => {
        log.mark(`exit ${l.unit}: ${e.signal ? `signal ${e.signal}` : `code ${e.code}`}`, deps.clock.now());
        log.close();
      };
      if (l.mode === 'acp') {
        const session = await AcpSession.start({
          argv: l.argv,
          cwd: l.cwd,
          env: l.env,
          log,
          clock: deps.clock,
          waits: deps.waits,
          stopGraceMs: deps.stopGraceMs(),
          ...(l.onProgress ? { onProgress: l.onProgress } : {}),
        }).catch((e: unknown) => {
          log.close();
          throw e;
        });
        session.exited.then(closeLog);
        return unit(l.unit, session.pid, session.exited, () => session.stop(), { acp: session });
      }
      if (l.mode === 'pty') {
        const terminal = PtyTerminal.spawn({ agentId: l.agentId, argv: l.argv, cwd: l.cwd, env: l.env, log });
        terminal.exited.then(closeLog);
        return unit(
          l.unit,
          terminal.pid,
          terminal.exited,
          () => stopGroup(terminal.pid, deps.stopGraceMs(), deps.waits),
          {
            terminal,
          },
        );
      }
      const child = spawnGroup(l.argv, { cwd: l.cwd, env: l.env, stdin: 'ignore' });
      child.stdout?.on('data', (b: Buffer) => log.write(b));
      child.stderr?.on('data', (b: Buffer) => log.write(b));
      const exited = new Promise<ExitInfo>((resolve) => {
        child.once('exit', (code, signal) => resolve({ code, signal }));
        child.once('error', (e) => {
          log.write(`cannot start ${l.argv[0]}: ${e.message}\n`);
          resolve({ code: null, signal: null });
        });
      });
      exited.then(closeLog);
      const pid = child.pid ?? null;
      return unit(l.unit, pid, exited, async () => {
        if (pid !== null) await stopGroup(pid, deps.stopGraceMs(), deps.waits);
      });
    },

    async probe(units) {
      // Exits are seen as they happen (the exited promises); nothing to ask the system.
      return new Map(units.map((u) => [u.unit, (u as ProcessUnit).alive]));
    },

    async adopt(l, previousPid) {
      if (previousPid !== null) await reapOrphanGroup(previousPid, l.unit, deps.stopGraceMs(), deps.waits);
      return null;
    },
  };

  function unit(
    name: string,
    pid: number | null,
    exited: Promise<ExitInfo>,
    stopFn: () => Promise<unknown>,
    extra: { acp?: AcpSession; terminal?: PtyTerminal } = {},
  ): ProcessUnit {
    let stopping: Promise<void> | null = null;
    const u: ProcessUnit = {
      backend: 'process',
      unit: name,
      pid,
      exited,
      alive: pid !== null,
      ...extra,
      stop() {
        // Also after the leader died: grandchildren it left in the group go now.
        stopping ??= (async () => {
          await stopFn();
          if (pid !== null) await stopGroup(pid, deps.stopGraceMs(), deps.waits);
        })();
        return stopping;
      },
    };
    exited.then(() => {
      u.alive = false;
    });
    return u;
  }
}

interface ProcessUnit extends RunningUnit {
  alive: boolean;
}
