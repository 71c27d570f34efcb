// A DaemonContext for in-process tests of svcd components: a temp SVC_HOME, a real
// state.db, a fake or real clock, events collected in memory, and a real mgmt.sock server
// on a temp socket where a test registers its component's methods, as daemon.ts does (so
// methods are exercised as svc calls them).

import { mkdirSync } from 'node:fs';
import { MgmtClient } from '../../src/cli/mgmt-client.js';
import type { DaemonContext } from '../../src/daemon/context.js';
import { type MgmtMethod, registerMethods } from '../../src/daemon/mgmt/method.js';
import { MgmtServer } from '../../src/daemon/mgmt/server.js';
import { daemonPaths } from '../../src/daemon/paths.js';
import { SessionRegistry } from '../../src/daemon/secrets/index.js';
import { openStateStore } from '../../src/daemon/state/store.js';
import type { TowerApi } from '../../src/daemon/tower-client/api.js';
import type { Clock } from '../../src/lib/clock.js';
import { systemClock } from '../../src/lib/clock.js';
import { silentLogger } from '../../src/lib/log.js';
import type { NewEvent } from '../../src/protocol/events.js';
import { fakeControl } from './control.js';
import { makeTempDir } from './tmp.js';

export interface TestDaemonContext {
  ctx: DaemonContext;
  home: string;
  events: NewEvent[];
  /** Registers a component's mgmt.sock methods (what daemon.ts does for the real daemon). */
  register(methods: readonly MgmtMethod[]): void;
  /** Calls a mgmt.sock method over the real socket. */
  call<T>(method: string, params?: unknown): Promise<T>;
  close(): Promise<void>;
}

const offlineTower: TowerApi = {
  baseUrl: 'http://127.0.0.1:1',
  request: () => Promise.reject(new Error('no tower in this test')),
};

export async function makeTestDaemonContext(
  opts: { clock?: Clock; env?: NodeJS.ProcessEnv; home?: string } = {},
): Promise<TestDaemonContext> {
  const tmp = opts.home ? null : makeTempDir('svcd-test-');
  const home = opts.home ?? tmp!.dir;
  const paths = daemonPaths(home);
  for (const d of [paths.svcdDir, paths.logsDir, paths.workDir])
    mkdirSync(d, { recursive: true, mode: 0o700 });
  const clock = opts.clock ?? systemClock;
  const state = openStateStore(paths.stateDb, clock);
  const log = silentLogger();
  const mgmt = new MgmtServer(log);
  await mgmt.listen(paths.mgmtSock);
  const events: NewEvent[] = [];
  const shutdown = new AbortController();
  const ctx: DaemonContext = {
    clock,
    log,
    paths,
    identity: {
      node_id: 'node_test',
      hostname: 'test-host',
      backend_url: offlineTower.baseUrl,
      jwt: 'x.y.z',
    },
    env: opts.env ?? { PATH: process.env.PATH, HOME: process.env.HOME, SVC_HOME: home },
    state,
    tower: offlineTower,
    events: {
      publish: async (e) => {
        events.push(e);
      },
    },
    secrets: new SessionRegistry(paths.secretsSock),
    control: fakeControl(),
    shutdown: shutdown.signal,
  };
  let client: MgmtClient | null = null;
  return {
    ctx,
    home,
    events,
    register: (methods) => registerMethods(mgmt, methods),
    async call<T>(method: string, params?: unknown) {
      client ??= await MgmtClient.connect(paths.mgmtSock);
      return client.call<T>(method, params);
    },
    async close() {
      shutdown.abort();
      client?.close();
      await mgmt.close();
      await state.close();
      tmp?.remove();
    },
  };
}
