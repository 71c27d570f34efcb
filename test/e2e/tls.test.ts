// A tower with a self-signed certificate, as docs/operator-guide.md §2 sets it up: svc refuses
// it and says to use NODE_EXTRA_CA_CERTS; with it, svc works and svcd's control channel
// connects.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import { isolatedEnv, run, SVC_BIN, SVCD_BIN, spawnProc, startTowerProc, stopAll } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

describe('a tower with a self-signed certificate', () => {
  const tmp = makeTempDir('svc-e2e-tls-');
  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  it('is refused with the NODE_EXTRA_CA_CERTS hint, and trusted with it by svc and svcd', async () => {
    const cert = join(tmp.dir, 'cert.pem');
    const key = join(tmp.dir, 'key.pem');
    execFileSync('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      '/CN=svc-test-tower',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ]);
    const env = isolatedEnv(tmp.dir);
    const tower = await startTowerProc(env, ['--tls-cert', cert, '--tls-key', key]);
    expect(tower.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const token = readFileSync(join(env.SVC_HOME as string, 'tower', 'admin.token'), 'utf8').trim();
    const cli = { ...env, SVC_BASE_URL: tower.url, SVC_TOKEN: token };

    const refused = await run(SVC_BIN, ['domain', 'list'], cli);
    expect(refused.code).toBe(69);
    expect(refused.stderr.trim()).toBe(
      `svc: error: the tower at ${tower.url} presents a certificate this machine does not trust (DEPTH_ZERO_SELF_SIGNED_CERT): for a self-signed certificate or a private CA, set NODE_EXTRA_CA_CERTS to its PEM file (docs/operator-guide.md, section 2) [tower_unreachable]`,
    );

    const trusting = { ...cli, NODE_EXTRA_CA_CERTS: cert };
    expect((await run(SVC_BIN, ['domain', 'list'], trusting)).code).toBe(0);
    const reg = await run(SVC_BIN, ['agent', 'node', 'register', '--hostname', 'tls-node'], trusting);
    expect(reg.code, reg.stderr).toBe(0);
    const svcd = spawnProc(SVCD_BIN, ['run', '--log-level', 'warn'], trusting);
    await waitFor(
      "svcd's control channel over TLS",
      async () => {
        const code = await Promise.race([svcd.exited, Promise.resolve(null)]);
        if (code !== null) throw new Error(`svcd exited (${code}): ${svcd.stderr()}`);
        const s = await run(SVC_BIN, ['--json', 'daemon', 'status'], trusting);
        return s.code === 0 && (JSON.parse(s.stdout) as { tower: { connected: boolean } }).tower.connected;
      },
      { timeoutMs: 60_000 },
    );
  });
});
