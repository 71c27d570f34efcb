import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { FakeClock } from '../../lib/clock.js';
import { RequestDeadline } from './deadline.js';
import { installProblemHandlers } from './problem.js';

let app: FastifyInstance;
afterEach(async () => {
  await app?.close();
});

/** An app with a 1 s deadline on a fake clock, and a handler that waits on `hang` until released. */
function build(clock: FakeClock) {
  app = Fastify();
  installProblemHandlers(app);
  const deadline = new RequestDeadline(clock, 1000);
  deadline.install(app);
  let started = 0;
  let release: (v: unknown) => void = () => {};
  const hang = new Promise((r) => {
    release = r;
  });
  app.get('/hang', async () => {
    started++;
    await hang;
    return { late: true };
  });
  app.get('/quick', async () => ({ ok: true }));
  app.get('/stream', async (_req, reply) => {
    started++;
    reply.hijack();
    reply.raw.writeHead(200, { 'content-type': 'text/plain' });
    reply.raw.write('streaming');
    await hang;
    reply.raw.end();
  });
  return { started: () => started, release: (v: unknown) => release(v) };
}

describe('request deadline', () => {
  it('answers 503 unavailable with Retry-After when the handler is still waiting at the deadline', async () => {
    const clock = new FakeClock(0);
    const h = build(clock);
    const res = app.inject({ method: 'GET', url: '/hang' });
    await waitFor('the handler to start', () => h.started() === 1);
    await clock.advance(999);
    let done = false;
    void res.then(() => {
      done = true;
    });
    await clock.advance(0);
    expect(done).toBe(false);
    await clock.advance(1);
    const r = await res;
    expect(r.statusCode).toBe(503);
    expect(r.headers['retry-after']).toBe('1');
    expect(JSON.parse(r.body)).toMatchObject({ code: 'unavailable' });
    // The late outcome is dropped: no second answer, no error.
    h.release('late');
    await clock.advance(0);
  });

  it('lets a request that finishes in time through and leaves no timer behind', async () => {
    const clock = new FakeClock(0);
    build(clock);
    const r = await app.inject({ method: 'GET', url: '/quick' });
    expect(r.statusCode).toBe(200);
    expect(clock.pending()).toBe(0);
  });

  it('leaves a stream that took over the response alone past the deadline', async () => {
    const clock = new FakeClock(0);
    const h = build(clock);
    const server = await app.listen({ port: 0, host: '127.0.0.1' });
    const res = await fetch(`${server}/stream`);
    await waitFor('the stream to start', () => h.started() === 1);
    await clock.advance(5000);
    h.release(null);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('streaming');
  });
});
