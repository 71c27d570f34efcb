// `svc task …` (mesh tasks), `svc agent list` (enrolled agents), `svc agent node list`.
import type { Command } from 'commander';
import type { List } from '../../protocol/common.js';
import { type Agent, CLAIM_POLICIES, MESH_STATES, type MeshTask } from '../../protocol/mesh.js';
import type { Node } from '../../protocol/nodes.js';
import { seg } from '../client.js';
import { type CommandDeps, collect, globals } from '../deps.js';
import { keyValues, print, table } from '../output.js';
import { UsageError } from '../run.js';
import { registerTaskShow } from './task-show.js';

/** Parses an integer option, naming the flag when it is not one. */
export function intOption(flag: string, v: string): number {
  if (!/^-?\d+$/.test(v)) throw new UsageError(`${flag} must be an integer, got "${v}"`);
  return Number(v);
}

/** The claim policy of `svc task submit`: --assign alone implies assigned. */
export function submitPolicy(policy: string | undefined, assign: string | undefined): string {
  const p = policy ?? (assign ? 'assigned' : 'first_claim');
  if (!(CLAIM_POLICIES as readonly string[]).includes(p)) {
    throw new UsageError(`--policy must be one of ${CLAIM_POLICIES.join(', ')}, got "${p}"`);
  }
  if (p === 'assigned' && !assign) {
    throw new UsageError('--policy assigned needs --assign <agent_id>: the only agent that may claim it');
  }
  if (assign && p !== 'assigned') throw new UsageError(`--assign goes with --policy assigned, not "${p}"`);
  return p;
}

const taskColumns = [
  { header: 'id', get: (t: MeshTask) => t.id },
  { header: 'state', get: (t: MeshTask) => t.state },
  { header: 'prio', get: (t: MeshTask) => String(t.priority) },
  { header: 'policy', get: (t: MeshTask) => t.claim_policy },
  { header: 'attempt', get: (t: MeshTask) => `${t.attempt}/${t.max_attempts}` },
  { header: 'agent', get: (t: MeshTask) => t.claimed_by ?? t.assigned_agent_id ?? '' },
  { header: 'title', get: (t: MeshTask) => t.title.split('\n')[0] ?? '' },
];

export function registerTasks(program: Command, agent: Command, deps: CommandDeps): void {
  const task = program.command('task').description('mesh tasks: work for agents');
  task
    .command('submit [title]')
    .description('submit a mesh task to a mission (title as argument or --title)')
    .requiredOption('--mission <mission_id>', 'mission of the task')
    .option('--title <text>', 'what to do, in one line')
    .option('--description <text>', 'what to do (the prompt, after the title)')
    .option(
      '--policy <policy>',
      'first_claim | assigned | broadcast (default first_claim; assigned with --assign)',
    )
    .option('--priority <n>', 'higher first', '0')
    .option('--assign <agent_id>', 'the agent that must take it (policy assigned)')
    .option('--capability <capability>', 'required capability (repeatable)', collect)
    .option('--max-attempts <n>', 'attempts before it fails', '3')
    .option('--lease <seconds>', 'lease length', '60')
    .action(
      async (
        titleArg: string | undefined,
        o: {
          mission: string;
          title?: string;
          description?: string;
          policy?: string;
          priority: string;
          assign?: string;
          capability?: string[];
          maxAttempts: string;
          lease: string;
        },
        cmd: Command,
      ) => {
        const title = titleArg ?? o.title;
        if (!title) throw new UsageError('give the task a title: svc task submit --mission M --title "…"');
        if (titleArg !== undefined && o.title !== undefined) {
          throw new UsageError('give the title once: as an argument or with --title');
        }
        const body = {
          title,
          claim_policy: submitPolicy(o.policy, o.assign),
          priority: intOption('--priority', o.priority),
          max_attempts: intOption('--max-attempts', o.maxAttempts),
          lease_seconds: intOption('--lease', o.lease),
          ...(o.description ? { description: o.description } : {}),
          ...(o.assign ? { assigned_agent_id: o.assign } : {}),
          ...(o.capability ? { required_capabilities: o.capability } : {}),
        };
        const t = await (await deps.client(cmd)).post<MeshTask>(
          `/work/missions/${seg(o.mission)}/tasks`,
          body,
        );
        print(deps.io, Boolean(globals(cmd).json), t, () =>
          keyValues(t as unknown as Record<string, unknown>),
        );
      },
    );
  task
    .command('list')
    .description('mesh tasks of a mission')
    .requiredOption('--mission <mission_id>', 'mission to list')
    .option('--state <state>', 'pending | claimed | running | completed | failed | cancelled')
    .option('--limit <n>', 'page size', '100')
    .option('--cursor <cursor>', 'continue from a previous page')
    .action(async (o: { mission: string; state?: string; limit: string; cursor?: string }, cmd: Command) => {
      if (o.state !== undefined && !(MESH_STATES as readonly string[]).includes(o.state)) {
        throw new UsageError(`--state must be one of ${MESH_STATES.join(', ')}, got "${o.state}"`);
      }
      const q = new URLSearchParams({ limit: String(intOption('--limit', o.limit)) });
      if (o.state) q.set('state', o.state);
      if (o.cursor) q.set('cursor', o.cursor);
      const res = await (await deps.client(cmd)).get<List<MeshTask>>(
        `/work/missions/${seg(o.mission)}/tasks?${q}`,
      );
      print(
        deps.io,
        Boolean(globals(cmd).json),
        res,
        () => table(res.items, taskColumns) + (res.next_cursor ? `\nmore: --cursor ${res.next_cursor}` : ''),
      );
    });
  for (const [verb, what] of [
    ['get', 'show one mesh task'],
    ['retry', 'retry a failed task (attempt + 1)'],
    ['cancel', 'cancel a pending, claimed or running task'],
  ] as const) {
    task
      .command(`${verb} <task_id>`)
      .description(what)
      .action(async (id: string, _o, cmd: Command) => {
        const client = await deps.client(cmd);
        const t =
          verb === 'get'
            ? await client.get<MeshTask>(`/work/tasks/${seg(id)}`)
            : await client.post<MeshTask>(`/work/tasks/${seg(id)}/${verb}`);
        print(deps.io, Boolean(globals(cmd).json), t, () =>
          keyValues(t as unknown as Record<string, unknown>),
        );
      });
  }

  registerTaskShow(task, deps);

  agent
    .command('list')
    .description('agents enrolled at the tower')
    .option('--node <node_id>', 'only this node')
    .option('--domain <domain_id>', 'only this domain')
    .action(async (o: { node?: string; domain?: string }, cmd: Command) => {
      const q = new URLSearchParams({ limit: '500' });
      if (o.node) q.set('node_id', o.node);
      if (o.domain) q.set('domain_id', o.domain);
      const res = await (await deps.client(cmd)).get<List<Agent>>(`/agents?${q}`);
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        table(res.items, [
          { header: 'id', get: (a) => a.id },
          { header: 'status', get: (a) => a.status },
          { header: 'runtime', get: (a) => a.runtime },
          { header: 'node', get: (a) => a.node_id },
          { header: 'domain', get: (a) => a.domain_id },
          { header: 'capabilities', get: (a) => a.capabilities.join(',') },
        ]),
      );
    });
}

export function registerNodeList(node: Command, deps: CommandDeps): void {
  node
    .command('list')
    .description('nodes registered at the tower, online or not')
    .action(async (_o, cmd: Command) => {
      const res = await (await deps.client(cmd)).get<List<Node>>('/nodes');
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        table(res.items, [
          { header: 'id', get: (n) => n.id },
          { header: 'hostname', get: (n) => n.hostname },
          { header: 'online', get: (n) => (n.online ? 'yes' : 'no') },
          { header: 'registered', get: (n) => n.created_at },
        ]),
      );
    });
}
