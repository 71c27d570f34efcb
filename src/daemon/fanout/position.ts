// Where the fan-out stopped, kept in state.db: the id of the newest event it relayed. At
// start svcd resumes the tower feed after it and its ring continues from it, so a consumer
// that resumes across an svcd restart misses nothing published while svcd was down.
// Written at most once a second (and at stop): after a crash the position may be up to a
// second old, which repeats events upstream but never loses one.
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { StateMigration, StateStore } from '../state/store.js';

interface PositionTables {
  fanout_position: { id: number; last_event_id: string; updated_at: number };
}

export const POSITION_MIGRATIONS: StateMigration[] = [
  {
    version: 1,
    name: 'fanout position',
    up(db) {
      db.exec(
        'create table "fanout_position" ("id" integer primary key, "last_event_id" text not null, "updated_at" integer not null)',
      );
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

  async load(): Promise<string | null> {
    await this.state.migrate('fanout', POSITION_MIGRATIONS);
    const row = this.state.db.get<Pick<PositionTables['fanout_position'], 'last_event_id'>>(
      'select "last_event_id" from "fanout_position" where "id" = 1',
    );
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
      this.writing = this.writing.then(() => {
        try {
          const now = this.clock.now();
          this.state.db.run(
            'insert into "fanout_position" ("id", "last_event_id", "updated_at") values (1, ?, ?) on conflict ("id") do update set "last_event_id" = excluded."last_event_id", "updated_at" = excluded."updated_at"',
            [id, now],
          );
        } catch (e) {
          this.onError(e);
        }
      });
    }
    await this.writing;
  }
}
