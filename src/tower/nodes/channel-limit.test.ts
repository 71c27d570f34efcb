// Shedding load at the door: a replica holding its limit of node control channels answers a
// connect 503 with Retry-After (before the upgrade; svcd's side: daemon/tower-client/
// control-shed.test.ts), the tower listens with a backlog sized for a fleet, and a refused
// connect does not hold a place among the connects in flight (nodes/connect-admission.ts).
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { openNodeChannel } from '../../../test/support/node-channel.js';
import { waitFor } from '../../../test/support/poll.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { CONTROL_PATH } from '../../protocol/control.js';
import { CHANNELS_FULL_RETRY_AFTER_S } from './control-hub.js';

const _SECRET = 'b'.repeat(64);

describe('node channel limit and listen backlog', () => {
  let t: TestTower;
  let base: string;
  beforeAll(async () => {
    t = await startTestTower('sqlite', { maxNodeChannels: 1, listenBacklog: 1234 });
    base = await t.tower.listen('127.0.0.1', 0);
  });
  afterAll(async () => {
    await t?.close();
  });

  const register = async (name: string) =>
    (await t.call('POST', '/nodes', { hostname: name })).body as { id: string; jwt: string };

  /** Opens a channel and says hello; resolves with the socket once welcomed. */
  const connect = (jwt: string) => openNodeChannel(base, jwt);

  /** What a refused connect answers: status, Retry-After and the problem's code. */
  async function refusal(jwt: string) {
    return new Promise<{ status: number; retryAfter: string | undefined; code: string }>(
      (resolve, reject) => {
        const ws = new WebSocket(`${base.replace('http', 'ws')}${CONTROL_PATH}`, {
          headers: { authorization: `Bearer ${jwt}` },
        });
        ws.once('open', () => reject(new Error('the connect was accepted')));
        ws.once('error', () => {});
        ws.once('unexpected-response', (_req, res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => {
            body += d;
          });
          res.on('end', () => {
            resolve({
              status: res.statusCode ?? 0,
              retryAfter: res.headers['retry-after'] as string | undefined,
              code: (JSON.parse(body) as { code: string }).code,
            });
          });
        });
      },
    );
  }

  it('answers 503 with Retry-After past the limit, and accepts again once a channel closes', async () => {
    const a = await register('limit-a');
    const b = await register('limit-b');
    const held = await connect(a.jwt);
    expect(await refusal(b.jwt)).toEqual({
      status: 503,
      retryAfter: String(CHANNELS_FULL_RETRY_AFTER_S),
      code: 'unavailable',
    });
    expect(t.tower.nodes.isOnline(b.id)).toBe(false);
    held.close();
    await waitFor('the held channel to go', () => !t.tower.nodes.isOnline(a.id));
    const ws = await connect(b.jwt);
    expect(t.tower.nodes.isOnline(b.id)).toBe(true);
    ws.close();
    await waitFor('b to go', () => !t.tower.nodes.isOnline(b.id));
  });

  it('listens with the backlog it was given', () => {
    const port = new URL(base).port;
    const ss = spawnSync('ss', ['-ltnH', `sport = :${port}`], { encoding: 'utf8' });
    // For a listening socket, ss shows the backlog as Send-Q (the kernel caps it at somaxconn).
    const sendQ = Number(ss.stdout.trim().split(/\s+/)[2]);
    expect(sendQ).toBe(1234);
  });
});

describe('node connects in flight', () => {
  let t: TestTower;
  let base: string;
  beforeAll(async () => {
    t = await startTestTower('sqlite', { maxConnectsInFlight: 1 });
    base = await t.tower.listen('127.0.0.1', 0);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('frees the place of a connect refused for its credential, though its client keeps the socket', async () => {
    // Refused with 401; the client never hangs up (as an attacker would, to hold the place).
    let socketClosed = false;
    const status = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(`${base.replace('http', 'ws')}${CONTROL_PATH}`, {
        headers: { authorization: 'Bearer svc_not-a-token' },
      });
      ws.once('open', () => reject(new Error('the connect was accepted')));
      ws.once('error', () => {});
      ws.once('unexpected-response', (req, res) => {
        req.socket?.once('close', () => {
          socketClosed = true;
        });
        res.resume();
        resolve(res.statusCode ?? 0);
      });
    });
    expect(status).toBe(401);
    // The tower hangs up once its answer is sent.
    await waitFor('the tower to close the refused socket', () => socketClosed);
    const node = (await t.call('POST', '/nodes', { hostname: 'after-refusal' })).body as {
      id: string;
      jwt: string;
    };
    const ws = await openNodeChannel(base, node.jwt);
    expect(t.tower.nodes.isOnline(node.id)).toBe(true);
    ws.close();
    await waitFor('the node to go', () => !t.tower.nodes.isOnline(node.id));
  });
});
