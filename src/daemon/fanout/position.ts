// Where the fan-out stopped, kept in state.db: the id of the newest event it relayed. At
// start svcd resumes the tower feed after it and its ring continues from it, so a consumer
// that resumes across an svcd restart misses nothing published while svcd was down.
// Written at most once a second (and at stop): after a crash the position may be up to a
// second old, which repeats events upstream but never loses one.
import type { Kysely } from 'kysely';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { StateMigration, StateStore } from '../context.js';

interface PositionTables {
  fanout_position: { id: number; last_event_id: string; updated_at: number };
}

export const POSITION_MIGRATIONS: StateMigration[] = [
  {
    version: 1,
    name: 'fanout position',
    async up(raw) {
      const db = raw as unknown as Kysely<PositionTables>;
      await db.schema
        .createTable('fanout_position')
        .addColumn('id', 'integer', (c) => c.primaryKey())
        .addColumn('last_event_id', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'integer', (c) => c.notNull())
        .execute();
    },
  },
];

export class FanoutPosition {
  private pending: string | null = null;
  private timer: TimerHandle | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly state: StateStore,
    private readonly clock: Clock,
    private readonly onError: (e: unknown) => void,
  ) {}

  private get db(): Kysely<PositionTables> {
    return this.state.db as unknown as Kysely<PositionTables>;
  }

  async load(): Promise<string | null> {
    await this.state.migrate('fanout', POSITION_MIGRATIONS);
    const row = await this.db
      .selectFrom('fanout_position')
      .select('last_event_id')
      .where('id', '=', 1)
      .executeTakeFirst();
    return row?.last_event_id ?? null;
  }

  /** Remembers `id` as relayed; written within a second. */
  save(id: string): void {
    this.pending = id;
    this.timer ??= this.clock.setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, 1000);
  }

  /** Writes what is pending now (at stop). */
  async flush(): Promise<void> {
    this.timer?.cancel();
    this.timer = null;
    const id = this.pending;
    this.pending = null;
    if (id !== null) {
      this.writing = this.writing.then(() =>
        this.db
          .insertInto('fanout_position')
          .values({ id: 1, last_event_id: id, updated_at: this.clock.now() })
          .onConflict((oc) =>
            oc.column('id').doUpdateSet({ last_event_id: id, updated_at: this.clock.now() }),
          )
          .execute()
          .then(
            () => {},
            (e: unknown) => this.onError(e),
          ),
      );
    }
    await this.writing;
  }
}
