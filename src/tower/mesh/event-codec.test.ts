// The mesh event is encoded once (event-codec.ts): the event a transaction emits, the block
// PostgreSQL's statements write and the block's expansion all give the same event, payload
// JSON text included. The SQL is run on PostgreSQL against a `changed` CTE of task rows.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '../../../test/support/pg.js';
import type { MeshTask } from '../../protocol/mesh.js';
import { eventsFromRow } from '../feed/event-log.js';
import { meshBlockInsert, meshTaskBlocks, meshTaskEvent } from './event-codec.js';

const task = (over: Partial<MeshTask>): MeshTask => ({
  id: 'mt_1',
  mission_id: 'mis_a',
  domain_id: 'dom_a',
  title: 'a "quoted" \\ title',
  description: '',
  claim_policy: 'first_claim',
  priority: 0,
  assigned_agent_id: null,
  required_capabilities: [],
  state: 'failed',
  attempt: 2,
  max_attempts: 3,
  lease_seconds: 60,
  claimed_by: 'ag_a',
  result: null,
  failure_reason: 'no "luck"',
  parent_id: null,
  created_at: '2026-11-24T10:00:00.000Z',
  updated_at: '2026-11-24T10:00:00.000Z',
  ...over,
});

const TASKS = [
  task({}),
  task({ id: 'mt_2', claimed_by: null, assigned_agent_id: 'ag_b', parent_id: 'mt_0', title: 'run' }),
  task({ id: 'mt_3', claimed_by: null, failure_reason: null, title: 'ünïcode ✓' }),
];

/** Each task's event as the transaction path writes it, with the block's id and time. */
const whole = (action: string, extra: (t: MeshTask) => Record<string, unknown> | undefined) =>
  TASKS.map((t, i) => {
    const e = meshTaskEvent(t, action, extra(t));
    return {
      id: String(5001 + i),
      ts: '2026-11-24T10:00:00.000Z',
      ...e,
      domain_id: e.domain_id ?? null,
      mission_id: e.mission_id ?? null,
      agent_id: e.agent_id ?? null,
      status: e.status ?? null,
    };
  });

const blockRow = (payload: unknown) => ({
  id: '5001',
  ts: '2026-11-24T10:00:00.000Z',
  type: 'matrix',
  domain_id: null,
  mission_id: null,
  agent_id: null,
  status: null,
  n: TASKS.length,
  payload: JSON.stringify(payload),
});

describe('the mesh event codec', () => {
  it('gives the event of a task: its agent, state and payload, parent only when set', () => {
    const [plain, run] = [
      meshTaskEvent(task({}), 'failed', { reason: 'x' }),
      meshTaskEvent(TASKS[1] as MeshTask, 'claimed'),
    ];
    expect(plain).toEqual({
      type: 'matrix',
      domain_id: 'dom_a',
      mission_id: 'mis_a',
      agent_id: 'ag_a',
      status: 'failed',
      payload: {
        entity: 'mesh_task',
        action: 'failed',
        id: 'mt_1',
        title: task({}).title,
        state: 'failed',
        attempt: 2,
        reason: 'x',
      },
    });
    expect(run.agent_id).toBe('ag_b');
    expect(Object.keys(run.payload)).toEqual([
      'entity',
      'action',
      'id',
      'title',
      'state',
      'attempt',
      'parent_id',
    ]);
  });

  it('expands a compact block to the events the transaction path writes, member for member', () => {
    const compact = {
      mesh_task: 'failed',
      t: TASKS.map((t) => [
        t.domain_id,
        t.mission_id,
        t.claimed_by ?? t.assigned_agent_id,
        t.state,
        t.id,
        t.title,
        t.attempt,
        t.parent_id,
        { reason: t.failure_reason },
      ]),
    };
    const got = eventsFromRow(blockRow(compact), [meshTaskBlocks]);
    const want = whole('failed', (t) => ({ reason: t.failure_reason }));
    expect(got).toEqual(want);
    expect(got.map((e) => JSON.stringify(e))).toEqual(want.map((e) => JSON.stringify(e)));
  });

  describe('on postgres', () => {
    let schema: TestSchema;
    let db: pg.Client;
    beforeAll(async () => {
      schema = await createTestSchema();
      db = new pg.Client({ connectionString: schema.url.replace(/[?&]schema=.*$/, '') });
      await db.connect();
      await db.query(`set search_path to "${schema.schema}"`);
      await db.query('create table events (ts text, type text, n integer, payload text)');
    });
    afterAll(async () => {
      await db?.end();
      await schema?.drop();
    });

    /** Runs meshBlockInsert over TASKS as the rows of `changed`; the block row it wrote. */
    const written = async (action: string, extra?: Record<string, string>) => {
      await db.query('delete from events');
      const cols = [
        'id',
        'domain_id',
        'mission_id',
        'claimed_by',
        'assigned_agent_id',
        'state',
        'title',
        'attempt',
        'parent_id',
        'failure_reason',
      ] as const;
      const values = TASKS.flatMap((t) => cols.map((c) => t[c]));
      const rows = TASKS.map(
        (_, i) =>
          `(${cols.map((c, j) => `$${i * cols.length + j + 1}::${c === 'attempt' ? 'int' : 'text'}`).join(', ')})`,
      );
      await db.query(
        `with changed (${cols.join(', ')}) as (values ${rows.join(', ')}) ${meshBlockInsert(action, "'2026-11-24T10:00:00.000Z'", extra)}`,
        values,
      );
      const res = await db.query('select * from events');
      expect(res.rows).toHaveLength(1);
      return { ...blockRow(null), ...res.rows[0], id: '5001' };
    };

    it('writes a block that expands to the events the transaction path writes', async () => {
      const row = await written('failed', { reason: 'failure_reason' });
      expect(row.n).toBe(TASKS.length);
      const got = eventsFromRow(row, [meshTaskBlocks]);
      const want = whole('failed', (t) => ({ reason: t.failure_reason }));
      expect(got.map((e) => JSON.stringify(e))).toEqual(want.map((e) => JSON.stringify(e)));
    });

    it('writes no extra members when the change has none', async () => {
      const got = eventsFromRow(await written('claimed'), [meshTaskBlocks]);
      expect(got.map((e) => JSON.stringify(e))).toEqual(
        whole('claimed', () => undefined).map((e) => JSON.stringify(e)),
      );
    });
  });
});
