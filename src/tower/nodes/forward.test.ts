// The HTTP hop between replicas (forwardRequest): a request handed to the replica holding what
// it needs comes back with that replica's answer, carries the caller's credential and its hop
// count, reuses its connection, and a replica that refuses or never answers is node_offline.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSvcError } from '../../protocol/errors.js';
import { forwardRequest, HOP_HEADER } from './forward.js';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  socket: number;
}

describe('forwarding a request to the replica that holds the node', () => {
  const seen: Seen[] = [];
  const sockets = new Map<unknown, number>();
  let holder: http.Server;
  let holderAddress: string;
  let silent: http.Server;
  let silentAddress: string;
  let front: FastifyInstance;

  beforeAll(async () => {
    holder = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => {
        body += c.toString();
      });
      req.on('end', () => {
        if (!sockets.has(req.socket)) sockets.set(req.socket, sockets.size);
        seen.push({
          method: req.method ?? '',
          url: req.url ?? '',
          headers: req.headers,
          body,
          socket: sockets.get(req.socket) as number,
        });
        if (req.url?.endsWith('/busy')) {
          res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '2', 'x-other': 'no' });
          res.end('{"code":"unavailable"}');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ answered: req.url }));
      });
    });
    // Accepts and reads, never answers: a replica that hangs.
    silent = http.createServer(() => {});
    for (const s of [holder, silent]) await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    holderAddress = `http://127.0.0.1:${(holder.address() as AddressInfo).port}`;
    silentAddress = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    front = Fastify();
    front.all('/to/:where/*', async (req, reply) => {
      const where = (req.params as { where: string }).where;
      const address =
        where === 'holder' ? holderAddress : where === 'silent' ? silentAddress : 'http://127.0.0.1:1';
      try {
        return await forwardRequest({ replicaId: 'r', address }, req, reply, {
          timeoutMs: 300,
          what: 'node n_1',
        });
      } catch (e) {
        if (!isSvcError(e)) throw e;
        return reply.code(503).send({ code: e.code, message: e.message });
      }
    });
    await front.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await front?.close();
    for (const s of [holder, silent]) {
      s?.closeAllConnections();
      await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
    }
  });

  const frontUrl = (path: string) =>
    `http://127.0.0.1:${(front.server.address() as AddressInfo).port}${path}`;

  it('relays the answer, with the caller’s credential, its body and one hop more, on a kept connection', async () => {
    seen.length = 0;
    const post = await fetch(frontUrl('/to/holder/nodes/n_1/agents/a/actions?x=1'), {
      method: 'POST',
      headers: { authorization: 'Bearer caller', 'content-type': 'application/json', cookie: 'c=1' },
      body: JSON.stringify({ action: 'restart' }),
    });
    expect(post.status).toBe(200);
    expect(await post.json()).toEqual({ answered: '/to/holder/nodes/n_1/agents/a/actions?x=1' });
    const get = await fetch(frontUrl('/to/holder/nodes/n_1'), { headers: { [HOP_HEADER]: '1' } });
    expect(get.status).toBe(200);
    expect(seen.map((s) => [s.method, s.headers.authorization, s.headers[HOP_HEADER], s.body])).toEqual([
      ['POST', 'Bearer caller', '1', '{"action":"restart"}'],
      ['GET', undefined, '2', ''],
    ]);
    // Only the credential and what the body is cross; other headers (cookies) stay behind.
    expect(seen[0]?.headers.cookie).toBeUndefined();
    expect(seen[0]?.headers['content-type']).toBe('application/json');
    // Both requests went over one connection.
    expect(seen.map((s) => s.socket)).toEqual([seen[0]?.socket, seen[0]?.socket]);
  });

  it('relays an error answer with the headers a client acts on', async () => {
    const res = await fetch(frontUrl('/to/holder/busy'));
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('2');
    expect(res.headers.get('x-other')).toBeNull();
    expect(await res.json()).toEqual({ code: 'unavailable' });
  });

  it('answers node_offline when the replica refuses the connection or does not answer in time', async () => {
    for (const where of ['nobody', 'silent']) {
      const res = await fetch(frontUrl(`/to/${where}/nodes/n_1`));
      expect(res.status).toBe(503);
      const body = (await res.json()) as { code: string; message: string };
      expect(body.code).toBe('node_offline');
      expect(body.message).toMatch(
        /^node n_1: the replica holding it \(http:\/\/127\.0\.0\.1:\d+\) did not answer/,
      );
    }
  });
});
