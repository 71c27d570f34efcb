// `svcd get-secret` as an agent runs it: the built CLI against a real secrets.sock served by
// the broker component (with a stand-in tower), reading the socket and session from its env.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DaemonContext } from '../../src/daemon/context.js';
import { daemonPaths } from '../../src/daemon/paths.js';
import { createSecretsBroker, type SecretsBroker, SessionRegistry } from '../../src/daemon/secrets/index.js';
import { systemClock } from '../../src/lib/clock.js';
import { silentLogger } from '../../src/lib/log.js';
import { SvcError } from '../../src/protocol/errors.js';
import type { SecretFetched } from '../../src/protocol/secrets.js';
import { fakeControl } from '../support/control.js';
import { run, SVCD_BIN, stopAll } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

const VALUE = 'line one\nline two';

describe('svcd get-secret', () => {
  const tmp = makeTempDir('svc-getsecret-');
  let broker: SecretsBroker;
  let ctx: DaemonContext;
  let towerDown = false;

  beforeAll(async () => {
    const paths = daemonPaths(tmp.dir);
    mkdirSync(paths.svcdDir, { recursive: true, mode: 0o700 });
    ctx = {
      clock: systemClock,
      log: silentLogger(),
      paths,
      identity: { node_id: 'node_1', hostname: 'h', backend_url: 'http://tower.invalid', jwt: 'x' },
      env: {},
      state: undefined as unknown as DaemonContext['state'],
      tower: {
        baseUrl: 'http://tower.invalid',
        async request<T>(_m: string, path: string, body?: unknown): Promise<T> {
          if (towerDown)
            throw new SvcError('tower_unreachable', 'cannot reach the tower at http://tower.invalid');
          if (!path.startsWith('/secrets/TOKEN/')) throw new SvcError('secret_not_found', 'no');
          if ((body as { agent_id: string }).agent_id !== 'agt_1') throw new SvcError('not_granted', 'no');
          const r: SecretFetched = { name: 'TOKEN', domain_id: 'd', version: 1, value: VALUE };
          return r as T;
        },
      },
      events: { publish: async () => {} },
      secrets: new SessionRegistry(paths.secretsSock),
      control: fakeControl(),
      shutdown: new AbortController().signal,
    };
    broker = createSecretsBroker(ctx, {});
    await broker.start();
  });
  afterAll(async () => {
    await stopAll();
    await broker.stop();
    tmp.remove();
  });

  const envFor = (session: string) => ({
    SVC_SECRETS_SOCKET: ctx.paths.secretsSock,
    SVC_SECRETS_SESSION: session,
    SVC_HOME: tmp.dir,
  });

  it('prints the value with a newline, or exactly with --raw', async () => {
    const s = ctx.secrets.mint('agt_1');
    const plain = await run(SVCD_BIN, ['get-secret', 'TOKEN'], envFor(s.id));
    expect(plain).toEqual({ code: 0, stdout: `${VALUE}\n`, stderr: '' });
    const raw = await run(SVCD_BIN, ['get-secret', 'TOKEN', '--raw'], envFor(s.id));
    expect(raw).toEqual({ code: 0, stdout: VALUE, stderr: '' });
  });

  it('exits non-zero with the code on stderr when refused', async () => {
    const granted = ctx.secrets.mint('agt_1');
    const other = ctx.secrets.mint('agt_2');
    const ended = ctx.secrets.mint('agt_1');
    ended.revoke();
    const cases: [string[], Record<string, string>, number, RegExp][] = [
      [['get-secret', 'TOKEN'], envFor(other.id), 1, /\[not_granted\]\n$/],
      [['get-secret', 'OTHER'], envFor(granted.id), 1, /\[secret_not_found\]\n$/],
      [['get-secret', 'TOKEN'], envFor('forged-session'), 1, /\[unknown_session\]\n$/],
      [['get-secret', 'TOKEN'], envFor(ended.id), 1, /\[unknown_session\]\n$/],
      [['get-secret', 'bad name'], envFor(granted.id), 2, /invalid secret name "bad name"/],
      [['get-secret', 'TOKEN'], { SVC_HOME: tmp.dir }, 78, /SVC_SECRETS_SOCKET is not set/],
      [
        ['get-secret', 'TOKEN'],
        { ...envFor(granted.id), SVC_SECRETS_SOCKET: join(tmp.dir, 'nope.sock') },
        69,
        /cannot use .*nope\.sock \(ENOENT\): is svcd running/,
      ],
    ];
    for (const [args, env, code, stderr] of cases) {
      const r = await run(SVCD_BIN, args, { SVC_SECRETS_SOCKET: '', SVC_SECRETS_SESSION: '', ...env });
      expect(r.code, `${args.join(' ')} ${r.stderr}`).toBe(code);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(stderr);
    }
    towerDown = true;
    try {
      const down = await run(SVCD_BIN, ['get-secret', 'TOKEN'], envFor(granted.id));
      expect(down.code).toBe(69);
      expect(down.stderr).toBe(
        'svcd: error: cannot reach the tower at http://tower.invalid [tower_unreachable]\n',
      );
    } finally {
      towerDown = false;
    }
  });
});
