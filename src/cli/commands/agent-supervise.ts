// `svc agent supervise …` and `svc agent signal`: thin calls of svcd's agent.* methods on
// mgmt.sock (src/daemon/supervisor/methods.ts).
import type { Command } from 'commander';
import { daemonPaths } from '../../daemon/paths.js';
import type { AgentStatus, ReloadResult, SignalResult } from '../../protocol/agents.js';
import { type CommandDeps, globals } from '../deps.js';
import { mgmtCall } from '../mgmt-client.js';
import { keyValues, print, table } from '../output.js';
import { ExitStatus } from '../run.js';

export function registerAgentSupervise(agent: Command, deps: CommandDeps): void {
  const call = <T>(method: string, params?: unknown) =>
    mgmtCall<T>(daemonPaths(deps.io.paths.home).mgmtSock, method, params);
  const json = (cmd: Command) => Boolean(globals(cmd).json);

  const supervise = agent.command('supervise').description('supervised agents of this node (agents.toml)');
  supervise
    .command('list')
    .description('list supervised agents with their state')
    .action(async (_o, cmd: Command) => {
      const res = await call<{ items: AgentStatus[] }>('agent.list');
      print(deps.io, json(cmd), res, () =>
        res.items.length === 0
          ? 'no agents (define them in $SVC_HOME/svcd/agents.toml, then "svc agent supervise reload")'
          : table(res.items, [
              { header: 'id', get: (a) => a.id },
              { header: 'runtime', get: (a) => a.runtime },
              { header: 'backend', get: (a) => a.backend },
              { header: 'state', get: (a) => (a.paused ? `${a.state} (paused)` : a.state) },
              { header: 'pid', get: (a) => a.pid },
              { header: 'restarts', get: (a) => a.restarts },
              { header: 'started', get: (a) => a.started_at },
              { header: 'gave up until', get: (a) => a.gave_up_until },
            ]),
      );
    });

  supervise
    .command('status')
    .description('state, restarts, watchdog decisions and recent history of one agent')
    .argument('<agent_id>')
    .action(async (id: string, _o, cmd: Command) => {
      const s = await call<AgentStatus>('agent.status', { id });
      print(deps.io, json(cmd), s, () => {
        const { history, ...rest } = s;
        const lines = (history ?? []).map((h) => `  ${h.at}  ${h.action.padEnd(16)} ${h.reason}`);
        return `${keyValues(rest)}\nhistory:\n${lines.length ? lines.join('\n') : '  (none)'}`;
      });
    });

  for (const [verb, method, what] of [
    ['restart', 'agent.restart', 'restart an agent now (its process tree is stopped first)'],
    ['pause', 'agent.pause', 'disable auto-restart by the watchdog'],
    ['resume', 'agent.resume', 're-enable auto-restart (also lifts a give-up)'],
    ['start', 'agent.start', 'start a stopped agent'],
    ['stop', 'agent.stop', 'stop an agent (the watchdog leaves it stopped)'],
  ] as const) {
    supervise
      .command(verb)
      .description(what)
      .argument('<agent_id>')
      .action(async (id: string, _o, cmd: Command) => {
        const s = await call<AgentStatus>(method, { id });
        print(
          deps.io,
          json(cmd),
          s,
          () => `${s.id}: ${s.state}${s.paused ? ' (paused)' : ''}${s.pid !== null ? `, pid ${s.pid}` : ''}`,
        );
      });
  }

  supervise
    .command('reload')
    .description('re-read agents.toml and config.toml; an invalid file changes nothing')
    .action(async (_o, cmd: Command) => {
      const r = await call<ReloadResult>('agent.reload');
      print(deps.io, json(cmd), r, () =>
        (['added', 'removed', 'changed', 'unchanged'] as const)
          .map((k) => `${k}: ${r[k].length ? r[k].join(', ') : '-'}`)
          .join('\n'),
      );
    });

  agent
    .command('signal')
    .description(
      'send a prompt to an agent: ACP → new prompt on its session, mux_hosted → typed into its pane, CLI kinds → a new one-shot run',
    )
    .argument('<agent_id|profile>')
    .option('--prompt <text>', "the prompt (default: the agent's prompt in agents.toml)")
    .option('--wait', 'wait for the turn or run to finish; exit 1 if it failed')
    .action(async (target: string, o: { prompt?: string; wait?: boolean }, cmd: Command) => {
      const r = await call<SignalResult>('agent.signal', {
        target,
        ...(o.prompt !== undefined ? { prompt: o.prompt } : {}),
        ...(o.wait ? { wait: true } : {}),
      });
      print(deps.io, json(cmd), r, () => {
        const head = `${r.agent_id}: ${r.delivery}${r.run_id ? ` ${r.run_id}` : ''}`;
        if (!r.done) return `${head} (delivered; see the agent's log for the outcome)`;
        if (r.ok === false) return `${head} failed: ${r.failure}${r.summary ? `\n${r.summary}` : ''}`;
        return r.summary ? `${head} ok\n${r.summary}` : `${head} ok`;
      });
      if (r.done && r.ok === false) throw new ExitStatus(1);
    });
}
