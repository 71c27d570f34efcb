// The `matrix` event of a mesh task transition (docs/events.md), encoded only here: the event
// a transaction emits, the SQL of PostgreSQL's compact block of such events, and the codec the
// feed expands that block with, all giving the same event. No I/O.
import type { NewEvent } from '../../protocol/events.js';
import type { MeshTask } from '../../protocol/mesh.js';
import type { BlockCodec, BlockMember } from '../store/event-blocks.js';

/**
 * The payload: `{entity, action, id, title, state, attempt, parent_id?, ...extra}`, parent_id
 * only when set.
 */
function payloadOf(
  action: string,
  id: string,
  title: string,
  state: string,
  attempt: number,
  parentId: string | null,
  extra: Record<string, unknown> | undefined,
): Record<string, unknown> {
  return {
    entity: 'mesh_task',
    action,
    id,
    title,
    state,
    attempt,
    ...(parentId ? { parent_id: parentId } : {}),
    ...extra,
  };
}

/** The event of `action` on `t` (its state after the action); `extra`: more payload members. */
export function meshTaskEvent(t: MeshTask, action: string, extra?: Record<string, unknown>): NewEvent {
  return {
    type: 'matrix',
    domain_id: t.domain_id,
    mission_id: t.mission_id,
    agent_id: t.claimed_by ?? t.assigned_agent_id,
    status: t.state,
    payload: payloadOf(action, t.id, t.title, t.state, t.attempt, t.parent_id, extra),
  };
}

/**
 * A compact block: the action once, then per task, in task id order compared bytewise,
 * `[domain_id, mission_id, agent_id, state, id, title, attempt, parent_id, extra?]`.
 */
interface MeshBlock {
  mesh_task: string;
  t: [
    string,
    string,
    string | null,
    string,
    string,
    string,
    number,
    string | null,
    Record<string, unknown>?,
  ][];
}

/** Expands a compact block (meshBlockInsert) to the events meshTaskEvent gives. */
export const meshTaskBlocks: BlockCodec = {
  tag: 'mesh_task',
  expand(block) {
    const { mesh_task: action, t } = block as unknown as MeshBlock;
    return t.map(
      ([domain, mission, agent, state, id, title, attempt, parent, extra]): BlockMember => [
        domain,
        mission,
        agent,
        state,
        payloadOf(action, id, title, state, attempt, parent, extra),
      ],
    );
  },
};

/**
 * PostgreSQL: an insert of the events of the rows a CTE named `changed` returned (each row
 * its state after the change) as ONE block row of the event log, in the compact form
 * (MeshBlock); no row when nothing changed. `tsParam`: the statement's parameter holding the
 * events' time; `extra`: more payload members, name → column of `changed`.
 *
 * The JSON is put together as text: json_build_object and json_build_array look up the type
 * of every argument on every call (docs/perf-notes.md). Ids and states go in as they are
 * (newId()'s alphabet and a fixed set: nothing to escape); the title, the one free text, goes
 * through to_json.
 */
export function meshBlockInsert(action: string, tsParam: string, extra: Record<string, string> = {}): string {
  const more = Object.entries(extra)
    .map(([name, col]) => `',"${name}":' || coalesce(to_json(${col})::text, 'null')`)
    .join(' || ');
  const member = `'["' || domain_id || '","' || mission_id || '",'
      || coalesce('"' || coalesce(claimed_by, assigned_agent_id) || '"', 'null') || ',"' || state
      || '","' || id || '",' || to_json(title)::text || ',' || attempt || ','
      || coalesce('"' || parent_id || '"', 'null')${more ? ` || ',{' || ltrim((${more}), ',') || '}'` : ''} || ']'`;
  return `insert into events (ts, type, n, payload)
    select ${tsParam}, 'matrix', count(*),
      '{"mesh_task":"${action}","t":[' || string_agg(${member}, ',' order by id collate "C") || ']}'
    from changed having count(*) > 0`;
}
