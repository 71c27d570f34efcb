// mgmt.sock events.subscribe and `svc daemon events` with a real tower and svcd: the tower's
// events reach a local subscriber through svcd's fan-out, filtered, resumable by id, until
// the subscriber unsubscribes. And svcd answers every mgmt.sock method docs/architecture.md names.
import { createConnection } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MgmtClient } from '../../src/cli/mgmt-client.js';
import type { FeedEvent } from '../../src/protocol/events.js';
import type { EventsNotification, EventsSubscribeResult } from '../../src/protocol/local-feed.js';
import { JSONRPC_METHOD_NOT_FOUND } from '../../src/protocol/mgmt.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { run, SVC_BIN } from '../support/procs.js';

/** The names of the domains whose creation the events announce, in order. */
function createdDomains(events: EventsNotification['event'][]): string[] {
  return events
    .filter((e) => e.type === 'matrix')
    .map((e) => (e as unknown as FeedEvent).payload)
    .filter((p) => p.entity === 'domain' && p.action === 'created')
    .map((p) => p.name as string);
}

describe('events.subscribe through svcd, with a real tower', () => {
  let stack: NodeStack;
  const ids: string[] = [];

  beforeAll(async () => {
    stack = await startNodeStack({
      name: 'events',
      svcdFiles: { 'config.toml': '[fanout]\nenable = true\n' },
    });
    await waitFor('the fan-out to follow the tower', async () => {
      const c = await MgmtClient.connect(stack.mgmtSock);
      try {
        return (await c.call<{ upstream: { state: string } }>('fanout.status')).upstream.state === 'up';
      } finally {
        c.close();
      }
    });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it("streams the tower's events that pass the filter, in order, until the subscriber unsubscribes", async () => {
    const client = await MgmtClient.connect(stack.mgmtSock);
    const got: EventsNotification[] = [];
    client.onNotification = (method, params) => {
      if (method === 'events.event') got.push(params as EventsNotification);
    };
    const stream = client.call<EventsSubscribeResult>('events.subscribe', { type: ['matrix'] });
    // The subscription is in place once daemon.status counts it as a fan-out consumer.
    await waitFor('the subscription', async () => {
      const s = await client.call<{ components: { fanout: { consumers: number } } }>('daemon.status');
      return s.components.fanout.consumers === 1;
    });
    const names = ['alpha', 'beta', 'gamma'];
    for (const name of names) expect((await stack.admin('POST', '/domains', { name })).status).toBe(201);
    await waitFor('the three domains', () => createdDomains(got.map((n) => n.event)).length === 3);
    expect(createdDomains(got.map((n) => n.event))).toEqual(names);
    expect(got.every((n) => n.event.type === 'matrix' && n.subscription === 1)).toBe(true);
    for (const n of got) ids.push(n.event.id as string);
    expect(ids.map(BigInt)).toEqual([...ids.map(BigInt)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));

    expect(await client.call('events.unsubscribe', { subscription: 1 })).toEqual({ unsubscribed: 1 });
    expect(await stream).toEqual({ ended: 'unsubscribed', last_event_id: ids.at(-1), events: ids.length });
    // The connection serves other calls after its stream ended.
    expect((await client.call<{ pid: number }>('daemon.status')).pid).toBe(stack.svcd?.child.pid);
    client.close();
  });

  it('svc daemon events replays what followed --since from svcd and prints each event', async () => {
    const first = ids[0] as string;
    const json = await run(
      SVC_BIN,
      ['--json', 'daemon', 'events', '--type', 'matrix', '--since', first, '--limit', '2'],
      stack.env,
    );
    expect(json.code, json.stderr).toBe(0);
    const lines = json.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as FeedEvent);
    expect(lines.map((e) => e.id)).toEqual(ids.slice(1, 3));
    expect(lines.map((e) => e.payload.name)).toEqual(['beta', 'gamma']);

    const text = await run(SVC_BIN, ['daemon', 'events', '--since', first, '--limit', '1'], stack.env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(
      new RegExp(`^#${ids[1]} \\S+ matrix +dom_\\w+ domain created dom_\\w+ beta\\n$`),
    );
  });

  it('svc daemon events names the field of a bad --since', async () => {
    const r = await run(SVC_BIN, ['daemon', 'events', '--since', 'yesterday'], stack.env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('params/last_event_id');
  });

  it('answers every mgmt.sock method docs/architecture.md lists (none is "method not found")', async () => {
    const methods = [
      'daemon.status',
      ...['list', 'status', 'start', 'stop', 'restart', 'signal', 'pause', 'resume', 'reload', 'enroll'].map(
        (v) => `agent.${v}`,
      ),
      ...['list', 'describe', 'history', 'reload', 'gc'].map((v) => `cron.${v}`),
      ...['start', 'stop', 'status', 'follow'].map((v) => `worker.${v}`),
      'attach.list',
      'events.subscribe',
      'events.unsubscribe',
      'fanout.status',
      'mcp.call',
      'mcp.tools',
    ];
    // An unknown field: methods with a params schema refuse it before doing anything.
    const replies = await rawCalls(
      stack.mgmtSock,
      methods.map((method, i) => ({ jsonrpc: '2.0', id: i, method, params: { bogus: 1 } })),
    );
    const notFound = methods.filter((_, i) => replies.get(i)?.error?.code === JSONRPC_METHOD_NOT_FOUND);
    expect(notFound).toEqual([]);
    expect(replies.size).toBe(methods.length);
  });
});

/** Sends each request on one connection; the replies by id (raw, with their JSON-RPC codes). */
async function rawCalls(
  path: string,
  requests: { id: number }[],
): Promise<Map<number, { error?: { code: number } }>> {
  const replies = new Map<number, { error?: { code: number } }>();
  const socket = createConnection(path);
  let buf = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => {
    buf += d;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const msg = JSON.parse(buf.slice(0, nl)) as { id?: number; error?: { code: number } };
      buf = buf.slice(nl + 1);
      if (typeof msg.id === 'number') replies.set(msg.id, msg);
    }
  });
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write(requests.map((r) => `${JSON.stringify(r)}\n`).join(''));
  try {
    await waitFor('every reply', () => replies.size === requests.length);
  } finally {
    socket.destroy();
  }
  return replies;
}
