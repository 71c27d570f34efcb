// `svc task …` (mesh tasks: submit, list, get, retry, cancel), `svc node list` and
// `svc agent list`: thin calls of the tower's mesh and node routes, tables or --json.
import type { Command } from 'commander';
import type { List } from '../../protocol/common.js';
import { type Agent, CLAIM_POLICIES, MESH_STATES, type MeshTask } from '../../protocol/mesh.js';
import type { Node } from '../../protocol/nodes.js';
import { seg } from '../client.js';
import { type CommandDeps, collect, globals } from '../deps.js';
import { keyValues, print, table } from '../output.js';
import { UsageError } from '../run.js';

/** Parses an integer option, naming the flag when it is not one. */
export function intOption(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^-?\d+$/.test(v)) throw new UsageError(`${flag} must be an integer, got "${v}"`);
  return Number(v);
}

export interface SubmitOptions {
  title: string;
  description?: string;
  policy?: string;
  priority?: string;
  assign?: string;
  capability?: string[];
  maxAttempts?: string;
  leaseSeconds?: string;
}

/** The POST body of `svc task submit`; --assign alone implies the assigned policy. */
export function submitBody(o: SubmitOptions): Record<string, unknown> {
  const policy = o.policy ?? (o.assign ? 'assigned' : undefined);
  if (policy !== undefined && !(CLAIM_POLICIES as readonly string[]).includes(policy)) {
    throw new UsageError(`--policy must be one of ${CLAIM_POLICIES.join(', ')}, got "${policy}"`);
  }
  if (policy === 'assigned' && !o.assign) {
    throw new UsageError('--policy assigned needs --assign <agent_id>: the only agent that may claim it');
  }
  if (o.assign && policy !== 'assigned') {
    throw new UsageError(`--assign only goes with --policy assigned, not "${policy}"`);
  }
  const priority = intOption('--priority', o.priority);
  const maxAttempts = intOption('--max-attempts', o.maxAttempts);
  const leaseSeconds = intOption('--lease-seconds', o.leaseSeconds);
  return {
    title: o.title,
    ...(o.description !== undefined ? { description: o.description } : {}),
    ...(policy !== undefined ? { claim_policy: policy } : {}),
    ...(priority !== undefined ? { priority } : {}),
    ...(o.assign ? { assigned_agent_id: o.assign } : {}),
    ...(o.capability?.length ? { required_capabilities: o.capability } : {}),
    ...(maxAttempts !== undefined ? { max_attempts: maxAttempts } : {}),
    ...(leaseSeconds !== undefined ? { lease_seconds: leaseSeconds } : {}),
  };
}

function withCursor(text: string, cursor: string | null): string {
  return cursor ? `${text}\n\nmore: --cursor ${cursor}` : text;
}

const taskColumns = [
  { header: 'id', get: (t: MeshTask) => t.id },
  { header: 'state', get: (t: MeshTask) => t.state },
  { header: 'policy', get: (t: MeshTask) => t.claim_policy },
  { header: 'prio', get: (t: MeshTask) => t.priority },
  { header: 'attempt', get: (t: MeshTask) => `${t.attempt}/${t.max_attempts}` },
  { header: 'claimed_by', get: (t: MeshTask) => t.claimed_by },
  { header: 'title', get: (t: MeshTask) => t.title },
];

export function registerMeshCommands(program: Command, agent: Command, deps: CommandDeps): void {
  const task = program.command('task').description('mesh tasks: the claimable work queue of a mission');
  task
    .command('submit')
    .description('submit a task to a mission (agents claim it)')
    .requiredOption('--mission <mission_id>', 'mission the task belongs to')
    .requiredOption('--title <text>', 'what to do, in one line')
    .option('--description <text>', 'the full instructions')
    .option('--policy <policy>', `claim policy: ${CLAIM_POLICIES.join(' | ')} (default first_claim)`)
    .option('--priority <n>', 'higher is claimed first (-1000..1000, default 0)')
    .option('--assign <agent_id>', 'the only agent that may claim it (policy assigned)')
    .option('--capability <cap>', 'capability a claiming agent must have (repeatable)', collect)
    .option('--max-attempts <n>', 'attempts before the task fails for good')
    .option('--lease-seconds <n>', 'lease length; a worker heartbeats to keep it')
    .action(async (o: SubmitOptions & { mission: string }, cmd: Command) => {
      const body = submitBody(o);
      const t = await (await deps.client(cmd)).post<MeshTask>(`/work/missions/${seg(o.mission)}/tasks`, body);
      print(deps.io, Boolean(globals(cmd).json), t, () => keyValues(t));
    });
  task
    .command('list')
    .description("list a mission's tasks, optionally only those in one state")
    .requiredOption('--mission <mission_id>', 'mission to list')
    .option('--state <state>', `only tasks in this state: ${MESH_STATES.join(' | ')}`)
    .option('--limit <n>', 'page size', '100')
    .option('--cursor <cursor>', 'continue from a previous page')
    .action(async (o: { mission: string; state?: string; limit: string; cursor?: string }, cmd: Command) => {
      if (o.state !== undefined && !(MESH_STATES as readonly string[]).includes(o.state)) {
        throw new UsageError(`--state must be one of ${MESH_STATES.join(', ')}, got "${o.state}"`);
      }
      const q = new URLSearchParams({
        limit: String(intOption('--limit', o.limit)),
        ...(o.state ? { state: o.state } : {}),
        ...(o.cursor ? { cursor: o.cursor } : {}),
      });
      const res = await (await deps.client(cmd)).get<List<MeshTask>>(
        `/work/missions/${seg(o.mission)}/tasks?${q}`,
      );
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        withCursor(table(res.items, taskColumns), res.next_cursor),
      );
    });
  task
    .command('get <task_id>')
    .description('show one task')
    .action(async (id: string, _o, cmd: Command) => {
      const t = await (await deps.client(cmd)).get<MeshTask>(`/work/tasks/${seg(id)}`);
      print(deps.io, Boolean(globals(cmd).json), t, () => keyValues(t));
    });
  for (const [verb, what] of [
    ['retry', 'put a failed task back to pending (attempt + 1); other states are refused'],
    ['cancel', 'cancel a task that has not finished; a running worker is told to stop'],
  ] as const) {
    task
      .command(`${verb} <task_id>`)
      .description(what)
      .action(async (id: string, _o, cmd: Command) => {
        const t = await (await deps.client(cmd)).post<MeshTask>(`/work/tasks/${seg(id)}/${verb}`, {});
        print(deps.io, Boolean(globals(cmd).json), t, () => `${t.id}: ${t.state} (attempt ${t.attempt})`);
      });
  }

  const node = program.command('node').description('nodes registered with the tower');
  node
    .command('list')
    .description('list nodes and whether their control channel is connected')
    .action(async (_o, cmd: Command) => {
      const res = await (await deps.client(cmd)).get<List<Node>>('/nodes');
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        table(res.items, [
          { header: 'id', get: (n) => n.id },
          { header: 'hostname', get: (n) => n.hostname },
          { header: 'online', get: (n) => (n.online ? 'yes' : 'no') },
          { header: 'domains', get: (n) => (n.domains === null ? 'all' : n.domains.join(',')) },
        ]),
      );
    });

  agent
    .command('list')
    .description('list enrolled agents with their status (online | busy | idle | offline | errored)')
    .option('--node <node_id>', 'only agents of this node')
    .option('--domain <domain_id>', 'only agents of this domain')
    .option('--limit <n>', 'page size', '100')
    .option('--cursor <cursor>', 'continue from a previous page')
    .action(async (o: { node?: string; domain?: string; limit: string; cursor?: string }, cmd: Command) => {
      const q = new URLSearchParams({
        limit: String(intOption('--limit', o.limit)),
        ...(o.node ? { node_id: o.node } : {}),
        ...(o.domain ? { domain_id: o.domain } : {}),
        ...(o.cursor ? { cursor: o.cursor } : {}),
      });
      const res = await (await deps.client(cmd)).get<List<Agent>>(`/agents?${q}`);
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        withCursor(
          table(res.items, [
            { header: 'id', get: (a) => a.id },
            { header: 'name', get: (a) => a.name },
            { header: 'runtime', get: (a) => a.runtime },
            { header: 'status', get: (a) => a.status },
            { header: 'node', get: (a) => a.node_id },
            { header: 'domain', get: (a) => a.domain_id },
            { header: 'capabilities', get: (a) => a.capabilities.join(',') },
          ]),
          res.next_cursor,
        ),
      );
    });
}
