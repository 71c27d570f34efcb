// A request-latency probe for the feed benches: while the subscribers receive, small writes
// (POST /approvals, a pending approval in one domain: one row and its feed event, which no
// subscriber's `type=progress` filter selects) go to the tower at a steady, modest rate, so
// what fan-out does to the tower's other work shows as their latency (issue 33: with 10 000
// subscribers on one tower its event loop was held by fan-out and POST /approvals took
// 0.6–21 s). Each request's time is from just before it is sent to the end of its answer,
// on its own keep-alive agent; every one must be answered 201 (counted by the caller).
import http from 'node:http';

const now = () => performance.timeOrigin + performance.now();

/**
 * Starts posting to `${url}/approvals` at `rate` requests/s; `stop()` waits for the answers
 * and returns { sent, created (201s), failures: { 'status or error': n }, ms: [latencies] }.
 */
export function startPostProbe({ url, token, domainId, rate }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const ms = [];
  const failures = {};
  const pending = new Set();
  let sent = 0;
  let created = 0;
  let stopped = false;
  const fail = (why) => {
    failures[why] = (failures[why] ?? 0) + 1;
  };
  const post = () => {
    const body = JSON.stringify({ domain_id: domainId, title: `probe ${sent}` });
    sent++;
    const t0 = now();
    const p = new Promise((resolve) => {
      const req = http.request(
        `${url}/approvals`,
        {
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          res.resume();
          res.once('end', () => {
            if (res.statusCode === 201) {
              created++;
              ms.push(now() - t0);
            } else fail(`HTTP ${res.statusCode}`);
            resolve();
          });
        },
      );
      req.once('error', (e) => {
        fail(e.code ?? e.message);
        resolve();
      });
      req.end(body);
    }).finally(() => pending.delete(p));
    pending.add(p);
  };
  // Sends are due at fixed times from the start (not one interval after the last answer), so
  // a slow answer does not lower the rate the tower is asked to serve.
  const start = now();
  let timer = null;
  const tick = () => {
    if (stopped) return;
    const due = Math.floor(((now() - start) * rate) / 1000) + 1 - sent;
    for (let i = 0; i < due; i++) post();
    timer = setTimeout(tick, Math.max(1, 1000 / rate / 2));
  };
  tick();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await Promise.all([...pending]);
      agent.destroy();
      return { sent, created, failures, ms };
    },
  };
}

/** p50 and p99 (nearest rank) of a list of latencies, NaN when empty. */
export function probeFigures(ms) {
  const s = Float64Array.from(ms).sort();
  const pct = (p) => (s.length ? s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)] : Number.NaN);
  return { n: s.length, p50: pct(0.5), p99: pct(0.99), max: s.length ? s[s.length - 1] : Number.NaN };
}

/** A domain for the probe's approvals (the admin token creates it). */
export async function probeDomain(url, token, name = 'bench-probe') {
  const res = await fetch(`${url}/domains`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  const body = await res.json();
  if (res.status !== 201) throw new Error(`POST /domains: ${res.status} ${JSON.stringify(body)}`);
  return body.id;
}
