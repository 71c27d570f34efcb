// A store of either kind on its own temporary directory (and, on PostgreSQL, its own schema),
// opened without migrations so a test can migrate it step by step; close() removes it all.
import { openStore, type Store } from '../../src/tower/store/open.js';
import { createTestSchema } from './pg.js';
import { makeTempDir } from './tmp.js';

export interface TempStore {
  store: Store;
  close(): Promise<void>;
}

export async function openTempStore(
  dialect: 'sqlite' | 'postgres',
  prefix = 'svc-store-',
): Promise<TempStore> {
  const tmp = makeTempDir(prefix);
  const schema = dialect === 'postgres' ? await createTestSchema() : undefined;
  const store = await openStore({ dataDir: tmp.dir, ...(schema ? { database: schema.url } : {}) });
  return {
    store,
    async close() {
      await store.close();
      await schema?.drop();
      tmp.remove();
    },
  };
}
