// The parts of the feed benches that drive a tower (bench/feed on one tower, bench/feed-fleet
// on two replicas behind HAProxy): the publisher (POST /nodes/events on a keep-alive agent),
// publishing at a rate, the subscribers' process (clients.mjs) and the checks of its counts.
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { ROOT } from '../lib/report.mjs';

export const PAD = 'p'.repeat(48);
export const now = () => performance.timeOrigin + performance.now();
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? Number.NaN);
}

/** CPU time (user + system) a process has used, in ms. */
export function cpuMs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // clock ticks of 10 ms
}

/**
 * Publishes on a tower: POST /nodes/events with a node's JWT, each event with a fresh key.
 * `publish(batch)` sends one request for a batch of payloads; `settle()` waits for every
 * answer and returns how many events were not accepted (202). `answeredMs` holds each
 * request's time from send to answer (the commit), to tell publish from delivery in latency.
 */
export function towerPublisher({ url, jwt, sockets = 8 }) {
  let key = 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  const pending = new Set();
  const answeredMs = [];
  let failed = 0;
  return {
    answeredMs,
    publish(batch) {
      const events = batch.map((payload) => ({
        key: `k${key++}`,
        type: 'progress',
        agent_id: 'bench',
        payload,
      }));
      // node:http on a keep-alive agent: fetch costs the publishing process several times
      // the CPU per request, and its event loop is where each event's clock starts.
      const body = JSON.stringify({ events });
      const t0 = now();
      const p = new Promise((resolve) => {
        const req = http.request(
          `${url}/nodes/events`,
          {
            method: 'POST',
            agent,
            headers: {
              authorization: `Bearer ${jwt}`,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
            },
          },
          (res) => {
            res.resume();
            res.once('end', () => {
              if (res.statusCode !== 202) failed += batch.length;
              answeredMs.push(now() - t0);
              resolve();
            });
          },
        );
        req.once('error', () => {
          failed += batch.length;
          resolve();
        });
        req.end(body);
      }).finally(() => pending.delete(p));
      pending.add(p);
    },
    async settle() {
      await Promise.all([...pending]);
      return failed;
    },
    close() {
      agent.destroy();
    },
  };
}

/** Publishes at `rate` events/s for `seconds`; returns how many were sent and when it began. */
export async function publishAt(p, rate, seconds) {
  const start = now();
  let sent = 0;
  let seq = 0;
  for (;;) {
    const elapsed = now() - start;
    if (elapsed >= seconds * 1000) break;
    const due = Math.floor((rate * elapsed) / 1000) - sent;
    if (due > 0) {
      const t = now();
      p.publish(Array.from({ length: due }, () => ({ seq: seq++, t, pad: PAD })));
      sent += due;
    }
    await sleep(5);
  }
  return { sent, start, end: now() };
}

/** The subscribers' process (clients.mjs): `kind` svc, svc-ws or socket.io; driven by ask(). */
export function clientsFor(kind, url, token, n, part = 'all') {
  const child = fork(join(ROOT, 'bench/feed/clients.mjs'), [kind, url, token, String(n), part], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ask = (cmd) =>
    new Promise((resolve, reject) => {
      child.once('message', (m) => (m.error ? reject(new Error(m.error)) : resolve(m)));
      child.send(typeof cmd === 'string' ? { cmd } : cmd);
    });
  return { child, children: [child], ask };
}

/**
 * The same n subscribers in two processes: the sampled ones (which parse every event and
 * time it) in one, the counting ones in the other, so what the counting costs does not delay
 * the timing. They connect wave by wave together, so the sampled ones stay spread over the
 * connection order (servers write their streams in about that order). `ask` answers as one
 * process would: counts summed, latency and loop lag the sampled process's (`countingLagP99`
 * beside it).
 */
export function splitClientsFor(kind, url, token, n) {
  const sampled = clientsFor(kind, url, token, n, 'sampled');
  const counting = clientsFor(kind, url, token, n, 'counting');
  const both = (cmd) => Promise.all([sampled.ask(cmd), counting.ask(cmd)]);
  const merge = ([s, c]) => ({
    ...s,
    delivered: s.delivered + c.delivered,
    min: Math.min(s.min, c.min),
    max: Math.max(s.max, c.max),
    repeats: s.repeats + c.repeats,
    lastAt: Math.max(s.lastAt ?? 0, c.lastAt ?? 0),
    countingLagP99: c.lagP99,
  });
  const ask = async (cmd) => {
    if (cmd === 'connect') {
      for (let from = 0; from < n; from += 100) await both({ cmd, from, to: Math.min(n, from + 100) });
      return { connected: n };
    }
    if (cmd === 'close') {
      for (const c of [sampled, counting]) c.child.send({ cmd });
      return {};
    }
    return merge(await both(cmd));
  };
  return { child: sampled.child, children: [sampled.child, counting.child], ask };
}

/** Waits until the subscribers got `expected` events, or made no progress for 3 s. */
export async function delivered(c, expected) {
  let last = -1;
  let stalledSince = now();
  for (;;) {
    const s = await c.ask('stats');
    if (s.delivered >= expected) return s;
    if (s.delivered !== last) {
      last = s.delivered;
      stalledSince = now();
    } else if (now() - stalledSince > 3000) return s;
    await sleep(200);
  }
}

/**
 * Checks the counts of one step as the subscribers' process reported them when it ended:
 * each of the n subscribers got each of the `each` events published exactly once.
 */
export function checkStep(checks, what, counts, each, n) {
  checks.exact(`${what}: deliveries`, counts.delivered, each * n);
  checks.that(
    counts.min === each && counts.max === each,
    `${what}: each subscriber should have got ${each} events, got between ${counts.min} and ${counts.max}`,
  );
  checks.exact(`${what}: events a sampled subscriber got twice`, counts.repeats, 0);
}
