// Fuzzing mgmt.sock (fast-check): random bytes, truncated JSON, wrong types and lines over the
// limit. A line that is not a JSON-RPC request is answered -32700/-32600 and ends its
// connection; a request with bad params is answered and the connection goes on; other
// clients are served meanwhile; the server never crashes.
import { createConnection, type Socket } from 'node:net';
import { join } from 'node:path';
import { Type } from '@sinclair/typebox';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { silentLogger } from '../../lib/log.js';
import { compileCheck } from '../../protocol/check.js';
import {
  JsonRpcRequest,
  MGMT_MAX_IN_FLIGHT,
  MGMT_MAX_LINE_BYTES,
  MGMT_MAX_UNREAD_BYTES,
} from '../../protocol/mgmt.js';
import { MgmtServer } from './server.js';

interface Reply {
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string };
}

class Client {
  private buf = '';
  private waiters = new Map<number, (r: Reply) => void>();
  /** Replies with a null id (protocol errors), in order. */
  readonly anonymous: Reply[] = [];
  closed = false;
  private constructor(private readonly s: Socket) {
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      this.buf += d;
      for (let nl = this.buf.indexOf('\n'); nl >= 0; nl = this.buf.indexOf('\n')) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        const r = JSON.parse(line) as Reply;
        if (typeof r.id === 'number') this.waiters.get(r.id)?.(r);
        else if (r.id === null) this.anonymous.push(r);
      }
    });
    s.on('close', () => {
      this.closed = true;
    });
    s.on('error', () => {});
  }
  static open(path: string): Promise<Client> {
    return new Promise((res, rej) => {
      const s = createConnection(path);
      s.once('connect', () => res(new Client(s)));
      s.once('error', rej);
    });
  }
  /** Stops reading replies (they pile up in the server) until resume(). */
  pause() {
    this.s.pause();
  }
  resume() {
    this.s.resume();
  }
  raw(data: string | Uint8Array) {
    this.s.write(data);
  }
  call(id: number, method: string, params?: unknown): Promise<Reply> {
    return new Promise((res) => {
      this.waiters.set(id, res);
      this.s.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  }
  close() {
    this.s.destroy();
  }
}

const BIG_REPLY = 'y'.repeat(64 * 1024);

async function until(what: string, cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('mgmt.sock under fuzzing', () => {
  const tmp = makeTempDir('svc-mgmt-fuzz-');
  const sock = join(tmp.dir, 'mgmt.sock');
  const server = new MgmtServer(silentLogger());
  let nextId = 1_000_000;

  beforeAll(async () => {
    server.register(
      'echo',
      async (p) => p,
      Type.Object({ n: Type.Integer() }, { additionalProperties: false }),
    );
    server.register('big', async () => BIG_REPLY);
    // A stream that stays open until its client leaves, like events.subscribe.
    server.register(
      'hold',
      (_p, call) =>
        new Promise((resolve) => {
          call.streaming();
          call.signal.addEventListener('abort', () => resolve(null), { once: true });
        }),
    );
    await server.listen(sock);
  });
  afterAll(async () => {
    await server.close();
    tmp.remove();
  });

  const junk = fc.oneof(
    fc.uint8Array({ maxLength: 2000 }),
    fc.string({ maxLength: 500 }),
    fc.json().map((j) => j.slice(0, Math.max(0, j.length - 1))),
    fc
      .record({
        jsonrpc: fc.oneof(fc.constant('2.0'), fc.anything()),
        id: fc.oneof(fc.string(), fc.double(), fc.constant(null), fc.anything()),
        method: fc.oneof(fc.constant('echo'), fc.constant('daemon.status'), fc.string(), fc.anything()),
        params: fc.anything(),
      })
      .map((o) => JSON.stringify(o)),
  );

  const isRequestLine = (line: string): boolean => {
    try {
      const v: unknown = JSON.parse(line);
      return compileCheck(JsonRpcRequest)(v) === null;
    } catch {
      return false;
    }
  };

  it('ends a connection after a line that is not a request, answering why; others go on', async () => {
    const other = await Client.open(sock);
    await fc.assert(
      fc.asyncProperty(junk, fc.integer(), async (j, n) => {
        const c = await Client.open(sock);
        const text = typeof j === 'string' ? j : Buffer.from(j).toString('utf8');
        const lines = text.split('\n').filter((l) => l.trim() !== '');
        c.raw(typeof j === 'string' ? j : Buffer.from(j));
        c.raw('\n');
        const id = nextId++;
        const o = await other.call(id, 'echo', { n: 1 });
        expect(o).toMatchObject({ id, result: { n: 1 } });
        if (lines.every(isRequestLine)) {
          expect(await c.call(id, 'echo', { n })).toMatchObject({ id, result: { n } });
          expect(c.closed).toBe(false);
        } else {
          await until('the connection to close', () => c.closed);
          const codes = c.anonymous.map((r) => r.error?.code);
          expect(codes.some((code) => code === -32700 || code === -32600)).toBe(true);
        }
        c.close();
      }),
      { numRuns: 150 },
    );
    other.close();
  });

  it('answers null, [] and 1 with -32600 Invalid Request, not an internal error', async () => {
    for (const line of ['null', '[]', '1', '"s"', '{}', '{"jsonrpc":"2.0"}', '[null]']) {
      const c = await Client.open(sock);
      c.raw(`${line}\n`);
      await until(`the connection to close after ${line}`, () => c.closed);
      expect(c.anonymous.map((r) => r.error?.code)).toEqual([-32600]);
    }
  });

  it('rejects wrong param types with a JSON-RPC error and keeps the connection', async () => {
    const c = await Client.open(sock);
    for (const params of [{ n: 'x' }, { n: 1.5 }, { m: 1 }, [1]]) {
      const r = await c.call(nextId++, 'echo', params);
      expect(r.error?.code).toBeTypeOf('number');
    }
    const unknown = await c.call(nextId++, 'no.such.method');
    expect(unknown.error?.code).toBe(-32601);
    expect(await c.call(nextId++, 'echo', { n: 7 })).toMatchObject({ result: { n: 7 } });
    c.close();
  });

  it('ends a connection whose line is over the limit without buffering it', async () => {
    const c = await Client.open(sock);
    const chunk = 'x'.repeat(256 * 1024);
    const before = process.memoryUsage().rss;
    for (let i = 0; i < (MGMT_MAX_LINE_BYTES / chunk.length) * 4 && !c.closed; i++) c.raw(chunk);
    await until('the connection to close', () => c.closed);
    expect(c.anonymous.map((r) => r.error?.code)).toEqual([-32700]);
    // 4 MiB were sent; the server held at most one line's limit of it.
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
    const again = await Client.open(sock);
    expect(await again.call(nextId++, 'echo', { n: 3 })).toMatchObject({ result: { n: 3 } });
    again.close();
  });

  it('stops reading the requests of a client that does not read its replies, and loses none', async () => {
    const c = await Client.open(sock);
    c.pause();
    const n = 2000; // 125 MiB of replies if the server kept reading
    const first = nextId;
    nextId += n;
    const replies = Array.from({ length: n }, (_, i) => c.call(first + i, 'big'));
    // The server holds lines back once a limit's worth of replies sits unread.
    await until('the server to hold requests back', () => server.backlog().queued > 0);
    const held = server.backlog();
    const bound = MGMT_MAX_UNREAD_BYTES + MGMT_MAX_IN_FLIGHT * (BIG_REPLY.length + 100);
    expect(held.unread).toBeLessThanOrEqual(bound);
    c.resume();
    const all = await Promise.all(replies);
    expect(all.every((r, i) => r.id === first + i && r.result === BIG_REPLY)).toBe(true);
    expect(server.backlog().peakUnread).toBeLessThanOrEqual(bound);
    // And the connection serves as before.
    expect(await c.call(nextId++, 'echo', { n: 5 })).toMatchObject({ result: { n: 5 } });
    c.close();
  });

  it('does not count open streams against the requests a connection may run at once', async () => {
    const c = await Client.open(sock);
    for (let i = 0; i < MGMT_MAX_IN_FLIGHT * 2; i++) void c.call(nextId++, 'hold');
    expect(await c.call(nextId++, 'echo', { n: 9 })).toMatchObject({ result: { n: 9 } });
    c.close();
  });
});
