// Tables of the secrets area (migration range 30–39): secrets per domain, their encrypted
// versions, grants to agents, and the registry of master key fingerprints ever used.
import type { Kysely } from 'kysely';
import type { Migration } from '../store/migrations.js';

export interface SecretRow {
  id: string;
  domain_id: string;
  name: string;
  description: string;
  /** Current version: the one nodes fetch. */
  version: number;
  created_at: string;
  updated_at: string;
}

export interface SecretVersionRow {
  secret_id: string;
  version: number;
  /** Fingerprint of the master key the value is sealed under. */
  key_id: string;
  nonce: string;
  ciphertext: string;
  created_at: string;
  created_by: string;
}

export interface SecretGrantRow {
  secret_id: string;
  agent_id: string;
  granted_at: string;
  granted_by: string;
}

export interface SecretKeyringRow {
  key_id: string;
  created_at: string;
}

export interface SecretTables {
  secrets: SecretRow;
  secret_versions: SecretVersionRow;
  secret_grants: SecretGrantRow;
  secret_keyring: SecretKeyringRow;
}

export const secretsMigration: Migration = {
  version: 30,
  name: 'secrets, secret versions, grants, master key registry',
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('secrets')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('domain_id', 'text', (c) => c.notNull().references('domains.id').onDelete('cascade'))
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('version', 'integer', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('secrets_domain_name', ['domain_id', 'name'])
      .execute();
    await db.schema
      .createTable('secret_versions')
      .addColumn('secret_id', 'text', (c) => c.notNull().references('secrets.id').onDelete('cascade'))
      .addColumn('version', 'integer', (c) => c.notNull())
      .addColumn('key_id', 'text', (c) => c.notNull())
      .addColumn('nonce', 'text', (c) => c.notNull())
      .addColumn('ciphertext', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('created_by', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('secret_versions_pk', ['secret_id', 'version'])
      .execute();
    await db.schema.createIndex('secret_versions_key').on('secret_versions').column('key_id').execute();
    await db.schema
      .createTable('secret_grants')
      .addColumn('secret_id', 'text', (c) => c.notNull().references('secrets.id').onDelete('cascade'))
      .addColumn('agent_id', 'text', (c) => c.notNull())
      .addColumn('granted_at', 'text', (c) => c.notNull())
      .addColumn('granted_by', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('secret_grants_pk', ['secret_id', 'agent_id'])
      .execute();
    await db.schema
      .createTable('secret_keyring')
      .addColumn('key_id', 'text', (c) => c.primaryKey())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
  },
};
