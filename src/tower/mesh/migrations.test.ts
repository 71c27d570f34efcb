// Upgrading a store to mesh_task_missions (migration 22) lists every existing task under its
// mission; deleting a mission (or its domain) still deletes its tasks, on both stores; on
// PostgreSQL the task table keeps no mission index or key (transitions do not touch one), and
// its key columns compare bytewise (migration 23).
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { openTempStore, type TempStore } from '../../../test/support/store.js';
import { FakeClock } from '../../lib/clock.js';
import { MIGRATIONS } from '../migrations.js';
import { migrate, type Store } from '../store/open.js';

const NOW = '2026-11-24T10:00:00.000Z';

describe.each(['sqlite', 'postgres'] as const)('mesh_task_missions migration on %s', (dialect) => {
  let tmp: TempStore | undefined;
  afterEach(async () => {
    await tmp?.close();
    tmp = undefined;
  });

  async function storeBefore22(): Promise<{ store: Store; clock: FakeClock }> {
    tmp = await openTempStore(dialect, 'svc-meshmig-');
    const { store } = tmp;
    const clock = new FakeClock(Date.parse(NOW));
    await migrate(
      store,
      clock,
      MIGRATIONS.filter((m) => m.version < 22),
    );
    const db = store.db;
    for (const d of ['dom_a', 'dom_b']) {
      await db
        .insertInto('domains')
        .values({ id: d, name: d, description: '', created_at: NOW, updated_at: NOW })
        .execute();
    }
    for (const [m, d] of [
      ['mis_1', 'dom_a'],
      ['mis_2', 'dom_a'],
      ['mis_3', 'dom_b'],
    ] as const) {
      await db
        .insertInto('missions')
        .values({
          id: m,
          domain_id: d,
          name: m,
          description: '',
          repository: null,
          created_at: NOW,
          updated_at: NOW,
        })
        .execute();
    }
    const task = (id: string, mission: string, domain: string, state: string) =>
      sql`insert into mesh_tasks (id, mission_id, domain_id, parent_id, title, description, claim_policy, priority,
          assigned_agent_id, required_capabilities, state, attempt, max_attempts, lease_seconds, created_at, updated_at)
        values (${id}, ${mission}, ${domain}, null, ${id}, '', 'first_claim', 0, null, '[]', ${state}, 1, 3, 60, ${NOW}, ${NOW})`;
    await task('mt_1a', 'mis_1', 'dom_a', 'pending').execute(db);
    await task('mt_1b', 'mis_1', 'dom_a', 'completed').execute(db);
    await task('mt_2a', 'mis_2', 'dom_a', 'pending').execute(db);
    await task('mt_3a', 'mis_3', 'dom_b', 'failed').execute(db);
    return { store, clock };
  }

  const taskIds = async (s: Store) =>
    (await s.db.selectFrom('mesh_tasks').select('id').orderBy('id').execute()).map((r) => r.id);
  const listed = async (s: Store) =>
    (await s.db.selectFrom('mesh_task_missions').select(['mission_id', 'id']).orderBy('id').execute()).map(
      (r) => `${r.mission_id}/${r.id}`,
    );

  it('lists every existing task under its mission, and deletes a deleted mission or domain with its tasks', async () => {
    const { store: s, clock } = await storeBefore22();
    expect(await migrate(s, clock, MIGRATIONS)).toContain(22);
    expect(await listed(s)).toEqual(['mis_1/mt_1a', 'mis_1/mt_1b', 'mis_2/mt_2a', 'mis_3/mt_3a']);

    await s.db.deleteFrom('missions').where('id', '=', 'mis_1').execute();
    expect(await taskIds(s)).toEqual(['mt_2a', 'mt_3a']);
    expect(await listed(s)).toEqual(['mis_2/mt_2a', 'mis_3/mt_3a']);

    await s.db.deleteFrom('domains').where('id', '=', 'dom_b').execute();
    expect(await taskIds(s)).toEqual(['mt_2a']);
    expect(await listed(s)).toEqual(['mis_2/mt_2a']);
  });

  it('refuses a task listing under a mission that does not exist', async () => {
    const { store: s, clock } = await storeBefore22();
    await migrate(s, clock, MIGRATIONS);
    await expect(
      s.db.insertInto('mesh_task_missions').values({ mission_id: 'mis_gone', id: 'mt_x' }).execute(),
    ).rejects.toThrow(/foreign key/i);
  });

  it.runIf(dialect === 'postgres')('leaves the task table without a mission index or key', async () => {
    const { store: s, clock } = await storeBefore22();
    await migrate(s, clock, MIGRATIONS);
    const indexes = await sql<{ indexname: string }>`select indexname from pg_indexes
      where schemaname = current_schema() and tablename = 'mesh_tasks' order by indexname`.execute(s.db);
    expect(indexes.rows.map((r) => r.indexname)).toEqual([
      'mesh_tasks_leased',
      'mesh_tasks_parent',
      'mesh_tasks_pending',
      'mesh_tasks_pkey',
    ]);
    const keys = await sql<{ conname: string }>`select conname from pg_constraint
      where conrelid = 'mesh_tasks'::regclass and contype = 'f'`.execute(s.db);
    expect(keys.rows).toEqual([]);
  });

  it.runIf(dialect === 'postgres')(
    'compares the task key columns bytewise (migration 23), keeping the rows',
    async () => {
      const { store: s, clock } = await storeBefore22();
      expect(await migrate(s, clock, MIGRATIONS)).toEqual(expect.arrayContaining([22, 23]));
      const cols = await sql<{
        column_name: string;
        collation_name: string | null;
      }>`select column_name, collation_name
      from information_schema.columns where table_schema = current_schema() and table_name = 'mesh_tasks'
        and column_name in ('id', 'domain_id', 'lease_expires_at') order by column_name`.execute(s.db);
      expect(cols.rows).toEqual([
        { column_name: 'domain_id', collation_name: 'C' },
        { column_name: 'id', collation_name: 'C' },
        { column_name: 'lease_expires_at', collation_name: 'C' },
      ]);
      expect(await taskIds(s)).toEqual(['mt_1a', 'mt_1b', 'mt_2a', 'mt_3a']);
      // Joined with a column of the default collation, as claims join agents.
      const joined = await sql<{
        id: string;
      }>`select t.id from mesh_tasks t join missions m on m.domain_id = t.domain_id
      where m.id = 'mis_3'`.execute(s.db);
      expect(joined.rows).toEqual([{ id: 'mt_3a' }]);
    },
  );
});
