// The records area's changes to the core tables (created by the store's migration 1).
import type { Migration } from '../store/migrations.js';

/** A mission's override of the nodes' permission policy (docs/agents.md, Permission policy). */
export const missionAgentPolicyMigration: Migration = {
  version: 3,
  name: 'missions: agent_policy',
  async up(db) {
    await db.schema.alterTable('missions').addColumn('agent_policy', 'text').execute();
  },
};
