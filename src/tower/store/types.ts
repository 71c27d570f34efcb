// Row types of the store's own tables (store/migrations.ts) as Kysely sees them. Timestamps
// are ISO 8601 UTC text (sortable as text on both stores); JSON columns are text and parsed
// at the repository edge. An area adds the tables of its migrations to `Tables` where it
// declares them (`declare module '../store/types.js'`), so the store imports no area.
import type { Generated, Kysely } from 'kysely';

export interface DomainRow {
  id: string;
  name: string;
  description: string;
  created_at: string;
  updated_at: string;
}

export interface MissionRow {
  id: string;
  domain_id: string;
  name: string;
  description: string;
  repository: string | null;
  created_at: string;
  updated_at: string;
}

export interface BoardTaskRow {
  id: string;
  domain_id: string;
  mission_id: string;
  title: string;
  description: string;
  status: string;
  created_at: string;
  updated_at: string;
}

export interface DocumentRow {
  id: string;
  domain_id: string;
  mission_id: string;
  title: string;
  content_type: string;
  content: string;
  created_at: string;
  updated_at: string;
}

export interface ArtifactRow {
  id: string;
  domain_id: string;
  mission_id: string;
  name: string;
  uri: string | null;
  content_type: string | null;
  size_bytes: number | string | null;
  metadata: string;
  created_at: string;
  updated_at: string;
}

export interface TokenRow {
  id: string;
  name: string;
  token_hash: string;
  scopes: string;
  domains: string | null;
  expires_at: string | null;
  revoked_at: string | null;
  created_at: string;
}

export interface SigningKeyRow {
  kid: string;
  alg: string;
  public_jwk: string;
  private_jwk: string;
  created_at: string;
  retired_at: string | null;
}

export interface NodeRow {
  id: string;
  hostname: string;
  /** Id of the node's current JWT; re-registration rotates it, so older JWTs stop working. */
  jti: string;
  /** JSON array of domain ids, or null for every domain (inherited from the registrar). */
  domains: string | null;
  created_at: string;
  updated_at: string;
}

export interface EventRow {
  /**
   * The public, strictly increasing event id, given at insert: bigint on PostgreSQL (a
   * decimal string), the rowid on SQLite. Readers read `feed_events`, where an id appears
   * only once every smaller one is settled (feed/sequencer.ts).
   */
  id: Generated<string | number>;
  ts: string;
  type: string;
  domain_id: string | null;
  mission_id: string | null;
  agent_id: string | null;
  status: string | null;
  /**
   * Null: one event. Otherwise a block of `n` events with ids `id` .. `id + n - 1`
   * (feed/migrations.ts, version 12): `payload` is a JSON array of
   * `[domain_id, mission_id, agent_id, status, payload]`, one per event in id order, and the
   * row's own domain, mission, agent and status are null. Only PostgreSQL writes blocks.
   */
  n: Generated<number | null>;
  payload: string;
}

export interface MigrationRow {
  version: number;
  name: string;
  applied_at: string;
}

export interface Tables {
  domains: DomainRow;
  missions: MissionRow;
  board_tasks: BoardTaskRow;
  documents: DocumentRow;
  artifacts: ArtifactRow;
  tokens: TokenRow;
  signing_keys: SigningKeyRow;
  nodes: NodeRow;
  events: EventRow;
  /** The events readers may read (feed/migrations.ts, version 11). */
  feed_events: EventRow;
  /** PostgreSQL only: one row, the watermark of feed_events. */
  event_watermark: { w: string };
  /** One row: the highest event id pruning deleted (feed/migrations.ts, version 14). */
  event_pruned: { through: string | number };
  svc_migrations: MigrationRow;
  /** One row, rewritten by the readiness probe while writes fail (store/readiness.ts). */
  store_probe: { id: number; at: string };
}

export type Db = Kysely<Tables>;
export type Dialect = 'sqlite' | 'postgres';
