// The load-balancer harness itself (test/support/haproxy.ts, replicas.ts): two real tower
// replicas on one PostgreSQL schema behind a real HAProxy. Requests alternate between the
// replicas, a WebSocket (/events/ws) passes through, and after one replica is killed with -9
// HAProxy marks it down and every request is answered by the other.
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { haproxyConfig, haproxyInstalled, parseServers } from '../support/haproxy.js';
import { waitFor } from '../support/poll.js';
import { type Replicas, startReplicas } from '../support/replicas.js';

let r: Replicas | null = null;
afterEach(async () => {
  await r?.stop();
  r = null;
});

async function get(url: string, token: string): Promise<number> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  await res.arrayBuffer();
  return res.status;
}

describe('haproxy config', () => {
  it('round-robins over every replica and health-checks /readyz', () => {
    const cfg = haproxyConfig({
      port: 4000,
      socket: '/tmp/x.sock',
      backends: [
        { name: 'r0', host: '127.0.0.1', port: 1 },
        { name: 'r1', host: '127.0.0.1', port: 2 },
      ],
      checkIntervalMs: 500,
      maxConn: 100,
    });
    expect(cfg).toContain('balance roundrobin');
    expect(cfg).toContain('option httpchk GET /readyz');
    expect(cfg).toContain('bind 127.0.0.1:4000 backlog 4096');
    expect(cfg).toContain('server r0 127.0.0.1:1 check');
    expect(cfg).toContain('server r1 127.0.0.1:2 check');
  });

  it('reads the servers of the towers backend from show stat', () => {
    const csv = [
      '# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status',
      'towers_in,FRONTEND,,,1,1,100,3,0,0,0,0,0,,,,,OPEN',
      'towers,r0,0,0,2,2,,5,0,0,,0,,0,0,0,0,UP',
      'towers,r1,0,0,0,1,,4,0,0,,0,,0,0,0,0,DOWN',
      'towers,BACKEND,0,0,2,2,10,9,0,0,0,0,,0,0,0,0,UP',
    ].join('\n');
    expect(parseServers(csv)).toEqual([
      { name: 'r0', status: 'UP', current: 2, total: 5 },
      { name: 'r1', status: 'DOWN', current: 0, total: 4 },
    ]);
  });
});

describe.skipIf(!haproxyInstalled())('two replicas behind HAProxy', () => {
  it('spreads requests, passes WebSockets, and routes around a replica killed with -9', async () => {
    r = await startReplicas({ n: 2, args: ['--rate-limit', '0'], checkIntervalMs: 200 });
    const { lb, admin } = r;
    const before = await lb.servers();
    for (let i = 0; i < 10; i++) expect(await get(`${lb.url}/domains`, admin)).toBe(200);
    const after = await lb.servers();
    // Round-robin: each replica answered half of them (health checks are not counted in stot).
    expect(after.map((s, i) => s.total - (before[i]?.total ?? 0))).toEqual([5, 5]);

    const ws = new WebSocket(`${lb.url.replace('http', 'ws')}/events/ws`, {
      headers: { authorization: `Bearer ${admin}` },
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const got: string[] = [];
    ws.on('message', (d) => got.push(String(d)));
    const created = await fetch(`${lb.url}/domains`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'through-lb' }),
    });
    expect(created.status).toBe(201);
    const domain = (await created.json()) as { id: string };
    const approval = await fetch(`${lb.url}/approvals`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ domain_id: domain.id, title: 'over the balancer' }),
    });
    expect(approval.status).toBe(201);
    await waitFor('the approval event on /events/ws', () =>
      got.some((m) => (JSON.parse(m) as { type: string }).type === 'approval'),
    );
    ws.close();

    const victim = r.towers[0];
    victim?.kill('SIGKILL');
    await victim?.exited;
    await waitFor('HAProxy to mark r0 down', async () =>
      (await lb.servers()).some((s) => s.name === 'r0' && s.status.startsWith('DOWN')),
    );
    for (let i = 0; i < 10; i++) expect(await get(`${lb.url}/domains`, admin)).toBe(200);
  });
});
