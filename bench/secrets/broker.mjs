// bench/secrets child: the secrets.sock broker component against the tower over HTTP, or
// (argv[2] = "bare") a bare unix socket server answering a fixed reply, as the floor.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { daemonPaths } from '../../dist/daemon/paths.js';
import { createSecretsBroker, SessionRegistry } from '../../dist/daemon/secrets/index.js';
import { createTowerApi } from '../../dist/daemon/tower-client/api.js';
import { systemClock } from '../../dist/lib/clock.js';
import { silentLogger } from '../../dist/lib/log.js';

const [mode, towerUrl, jwt, cacheTtl] = process.argv.slice(2);
const home = mkdtempSync(join(tmpdir(), 'svc-bench-broker-'));
const paths = daemonPaths(home);
mkdirSync(paths.svcdDir, { recursive: true, mode: 0o700 });
if (mode === 'bare') {
  const reply = `${JSON.stringify({ ok: true, value: 'x'.repeat(64) })}\n`;
  const server = createServer({ allowHalfOpen: true }, (s) => {
    s.once('data', () => s.end(reply));
    s.on('error', () => {});
  });
  server.listen(paths.secretsSock, () => {
    process.stdout.write(
      `${JSON.stringify({ socket: paths.secretsSock, session: 'none', pid: process.pid })}\n`,
    );
  });
} else {
  const secrets = new SessionRegistry(paths.secretsSock);
  const ctx = {
    clock: systemClock,
    log: silentLogger(),
    paths,
    identity: { node_id: 'n', hostname: 'h', backend_url: towerUrl, jwt },
    env: cacheTtl ? { SVC_SECRETS_CACHE_TTL: cacheTtl } : {},
    state: undefined,
    tower: createTowerApi(towerUrl, jwt),
    events: { publish: async () => {} },
    secrets,
    shutdown: new AbortController().signal,
  };
  const broker = createSecretsBroker(ctx);
  await broker.start();
  const session = secrets.mint('agt_bench');
  process.stdout.write(
    `${JSON.stringify({ socket: paths.secretsSock, session: session.id, pid: process.pid })}\n`,
  );
  process.on('SIGTERM', () => void broker.stop().then(() => process.exit(0)));
}
