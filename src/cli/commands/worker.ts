// `svc daemon agent enroll`, `svc run <agent_kind>`, `svc worker status|stop`: thin calls of
// svcd's agent.enroll and worker.* methods over mgmt.sock.
import type { Command } from 'commander';
import { daemonPaths } from '../../daemon/paths.js';
import { type CommandDeps, collect, globals } from '../deps.js';
import { MgmtClient, mgmtCall } from '../mgmt-client.js';
import { keyValues, print, table } from '../output.js';

interface LoopStatus {
  runtime: string;
  domain_id: string;
  agent_id: string;
  max_concurrent: number;
  running: { task_id: string; title: string }[];
  completed: number;
  failed: number;
  last_error: string | null;
}

export function registerWorker(program: Command, daemon: Command, deps: CommandDeps): void {
  const sock = () => daemonPaths(deps.io.paths.home).mgmtSock;
  daemon
    .command('agent')
    .description('agents of this node enrolled at the tower')
    .command('enroll')
    .description('enrol an agent of this node in a domain (it can then claim mesh tasks)')
    .requiredOption('--domain <domain_id>', 'domain the agent works in')
    .requiredOption(
      '--runtime <kind>',
      'runtime kind: alpha_code, alpha_agent_acp, beta_cli, gamma_cli, mux_hosted',
    )
    .option('--capability <capability>', 'a capability tasks may require (repeatable)', collect)
    .option('--name <name>', 'display name')
    .action(
      async (o: { domain: string; runtime: string; capability?: string[]; name?: string }, cmd: Command) => {
        const agent = await mgmtCall<Record<string, unknown>>(sock(), 'agent.enroll', {
          domain_id: o.domain,
          runtime: o.runtime,
          ...(o.capability ? { capabilities: o.capability } : {}),
          ...(o.name ? { name: o.name } : {}),
        });
        print(deps.io, Boolean(globals(cmd).json), agent, () => keyValues(agent));
      },
    );

  program
    .command('run <agent_kind>')
    .description('start a work loop in svcd: claim mesh tasks of a domain and run each in a subagent')
    .requiredOption('--domain <domain_id>', 'domain whose tasks to claim')
    .option('--max-concurrent <n>', 'subagents at once (default: config.toml [worker] max_concurrent, 3)')
    .option(
      '--poll <seconds>',
      'claim poll interval besides task_ready (default: [worker] poll_interval, 30 s)',
    )
    .option('--timeout <seconds>', 'fail a task whose subagent runs longer')
    .option('--foreground', 'stream the loop’s claims, progress and outcomes here until Ctrl-C, then stop it')
    .option('--no-task-ready', 'diagnostics: ignore task_ready and find work by polling only')
    .option(
      '--capability <capability>',
      'capabilities of the agent, when it is enrolled now (repeatable)',
      collect,
    )
    .action(
      async (
        kind: string,
        o: {
          domain: string;
          maxConcurrent?: string;
          poll?: string;
          timeout?: string;
          capability?: string[];
          foreground?: boolean;
          taskReady: boolean;
        },
        cmd: Command,
      ) => {
        const json = Boolean(globals(cmd).json);
        const loop = await mgmtCall<LoopStatus>(sock(), 'worker.start', {
          runtime: kind,
          domain_id: o.domain,
          ...(o.maxConcurrent !== undefined ? { max_concurrent: Number(o.maxConcurrent) } : {}),
          ...(o.poll !== undefined ? { poll_seconds: Number(o.poll) } : {}),
          ...(o.timeout ? { timeout_seconds: Number(o.timeout) } : {}),
          ...(o.capability ? { capabilities: o.capability } : {}),
          ...(o.taskReady === false ? { task_ready: false } : {}),
        });
        if (o.foreground) {
          await followLoop(deps, sock(), loop, json);
          return;
        }
        print(
          deps.io,
          json,
          loop,
          () =>
            `work loop running: agent ${loop.agent_id} (${loop.runtime}) claims tasks of ${loop.domain_id}, up to ${loop.max_concurrent} at once\nfollow it with: svc feed --domain ${loop.domain_id}`,
        );
      },
    );

  const worker = program.command('worker').description('work loops in svcd');
  worker
    .command('status')
    .description('work loops, their running tasks and counts')
    .action(async (_o, cmd: Command) => {
      const s = await mgmtCall<{ loops: LoopStatus[] }>(sock(), 'worker.status');
      print(deps.io, Boolean(globals(cmd).json), s, () =>
        s.loops.length === 0
          ? 'no work loops: start one with "svc run <agent_kind> --domain D"'
          : table(s.loops, [
              { header: 'runtime', get: (l) => l.runtime },
              { header: 'domain', get: (l) => l.domain_id },
              { header: 'agent', get: (l) => l.agent_id },
              { header: 'running', get: (l) => `${l.running.length}/${l.max_concurrent}` },
              { header: 'completed', get: (l) => String(l.completed) },
              { header: 'failed', get: (l) => String(l.failed) },
              { header: 'error', get: (l) => l.last_error ?? '' },
            ]),
      );
    });
  worker
    .command('stop')
    .description('stop claiming (running subagents finish, unless --now)')
    .option('--runtime <kind>', 'only this runtime')
    .option('--domain <domain_id>', 'only this domain')
    .option('--now', 'stop running subagents too (their tasks are re-queued when their leases expire)')
    .action(async (o: { runtime?: string; domain?: string; now?: boolean }, cmd: Command) => {
      const s = await mgmtCall<{ stopped: LoopStatus[] }>(sock(), 'worker.stop', {
        ...(o.runtime ? { runtime: o.runtime } : {}),
        ...(o.domain ? { domain_id: o.domain } : {}),
        ...(o.now ? { now: true } : {}),
      });
      print(deps.io, Boolean(globals(cmd).json), s, () => `stopped ${s.stopped.length} work loop(s)`);
    });
}

interface WorkerEvent {
  at: string;
  type: string;
  task_id?: string;
  title?: string;
  message?: string;
}

/** `svc run --foreground`: print the loop's events until Ctrl-C (or svcd going away), then stop it. */
async function followLoop(deps: CommandDeps, sock: string, loop: LoopStatus, json: boolean): Promise<void> {
  const ref = { runtime: loop.runtime, domain_id: loop.domain_id };
  const client = await MgmtClient.connect(sock);
  client.onNotification = (method, params) => {
    if (method !== 'worker.event') return;
    const e = params as WorkerEvent;
    deps.io.out(
      json
        ? JSON.stringify(e)
        : [e.at, e.type.padEnd(9), e.task_id ?? '', e.title ?? e.message ?? ''].join(' ').trimEnd(),
    );
  };
  deps.io.err(
    `work loop running: agent ${loop.agent_id} (${loop.runtime}) claims tasks of ${loop.domain_id}, up to ${loop.max_concurrent} at once; Ctrl-C stops it`,
  );
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
    client.close();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await client.call('worker.follow', ref);
  } catch (e) {
    if (!interrupted) throw e;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    client.close();
  }
  if (interrupted) {
    await mgmtCall(sock, 'worker.stop', ref).catch(() => {});
    deps.io.err('work loop stopped (running subagents finish their tasks)');
  }
}
