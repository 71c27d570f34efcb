// Every migration of the tower, in the order they were introduced: the store's own, then each
// area's. The composition root hands this list to the store; never edit an applied one, and
// give a new one the next free version of its area (versions are its identity in
// svc_migrations, and migrate() applies them in version order).
import {
  feedEventBlocksMigration,
  feedEventCompressionMigration,
  feedEventIdsMigration,
  feedEventPrunedMigration,
  feedMigration,
} from './feed/migrations.js';
import {
  meshBytewiseKeysMigration,
  meshMigration,
  meshPartialIndexesMigration,
  meshTaskMissionsMigration,
} from './mesh/migrations.js';
import { secretsMigration } from './secrets/migrations.js';
import { type Migration, STORE_MIGRATIONS } from './store/migrations.js';

export const MIGRATIONS: Migration[] = [
  ...STORE_MIGRATIONS,
  feedMigration,
  feedEventIdsMigration,
  meshMigration,
  meshPartialIndexesMigration,
  meshTaskMissionsMigration,
  meshBytewiseKeysMigration,
  secretsMigration,
  feedEventBlocksMigration,
  feedEventCompressionMigration,
  feedEventPrunedMigration,
];
