// Subscribers of bench/feed, in their own process: N SSE streams on the tower or N socket.io
// clients, each event's publish→receive latency taken from the publisher's timestamp in the
// payload (same machine, so wall clocks agree). Driven over IPC by index.mjs.
// SAMPLED subscribers, spread evenly over the connection order (servers write to their
// streams in about that order, so the first ones would see only the start of each fan-out),
// are full clients (every event parsed; socket.io-client for socket.io). The others only count events in the bytes their transport hands them (SSE:
// `data:` lines; WebSocket: frames, engine.io `42` event packets for socket.io), so the
// subscribers' process, which shares the machine with the server, measures the server rather
// than itself; both peers' counting readers do the same minimal work.
import http from 'node:http';
import { io } from 'socket.io-client';
import WebSocket from 'ws';

const [kind, url, token, nText] = process.argv.slice(2);
const N = Number(nText);
/** Latency is sampled on every STRIDE-th subscriber only (all of them count deliveries). */
const SAMPLED = 100;
const STRIDE = Math.max(1, Math.floor(N / SAMPLED));
const sampled = (i) => i % STRIDE === 0 && i / STRIDE < SAMPLED;
const now = () => performance.timeOrigin + performance.now();

let delivered = 0;
let lastAt = 0;
let samples = [];
const closers = [];

function onEvent(i, t) {
  delivered++;
  const at = now();
  lastAt = at;
  if (sampled(i)) samples.push(at - t);
}

function counted(n) {
  if (n === 0) return;
  delivered += n;
  lastAt = now();
}

const MARKER = Buffer.from('\ndata: ');
/** Counts SSE messages (`data:` lines) in a byte stream without decoding it. */
function sseCounter() {
  let tail = Buffer.alloc(0);
  return (chunk) => {
    let n = 0;
    if (tail.length > 0) {
      // A marker split across two reads.
      const joint = Buffer.concat([tail, chunk.subarray(0, MARKER.length - 1)]);
      if (joint.indexOf(MARKER) >= 0) n++;
    }
    for (let at = chunk.indexOf(MARKER); at >= 0; at = chunk.indexOf(MARKER, at + MARKER.length)) n++;
    tail = chunk.subarray(Math.max(0, chunk.length - (MARKER.length - 1)));
    return n;
  };
}

function openSse(i) {
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${url}/events/stream?type=progress`,
      { agent: false, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}`));
        closers.push(() => req.destroy());
        if (!sampled(i)) {
          const count = sseCounter();
          res.on('data', (chunk) => counted(count(chunk)));
          return resolve();
        }
        res.setEncoding('utf8');
        let buf = '';
        res.on('data', (chunk) => {
          buf += chunk;
          let at = 0;
          let end = buf.indexOf('\n\n');
          while (end >= 0) {
            const d = buf.indexOf('data: ', at);
            if (d >= 0 && d < end) onEvent(i, JSON.parse(buf.slice(d + 6, end)).payload.t);
            at = end + 2;
            end = buf.indexOf('\n\n', at);
          }
          buf = buf.slice(at);
        });
        resolve();
      },
    );
    req.on('error', reject);
  });
}

function openWs(i) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/events/ws?type=progress`, {
      headers: { authorization: `Bearer ${token}` },
      perMessageDeflate: false,
    });
    if (sampled(i)) ws.on('message', (data) => onEvent(i, JSON.parse(data).payload.t));
    else ws.on('message', () => counted(1));
    ws.once('open', resolve);
    ws.once('error', reject);
    closers.push(() => ws.terminate());
  });
}

/** A counting socket.io reader: engine.io 4 over a plain WebSocket (open, ping/pong, events). */
function openSocketIoCounter() {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/socket.io/?EIO=4&transport=websocket`, {
      perMessageDeflate: false,
    });
    ws.on('message', (data) => {
      // Engine.io packet types: 0 open, 2 ping, 4 message; socket.io 0 connect, 2 event.
      const a = data[0];
      const b = data[1];
      if (a === 0x34 && b === 0x32) counted(1);
      else if (a === 0x32) ws.send('3');
      else if (a === 0x30) ws.send('40');
      else if (a === 0x34 && b === 0x30) resolve();
    });
    ws.once('error', reject);
    closers.push(() => ws.terminate());
  });
}

function openSocketIo(i) {
  if (!sampled(i)) return openSocketIoCounter();
  return new Promise((resolve, reject) => {
    const s = io(url, { transports: ['websocket'], forceNew: true, reconnection: false });
    s.on('event', (ev) => onEvent(i, ev.payload.t));
    s.once('connect', resolve);
    s.once('connect_error', reject);
    closers.push(() => s.close());
  });
}

async function connectAll() {
  const open = kind === 'svc' ? openSse : kind === 'svc-ws' ? openWs : openSocketIo;
  // In waves, so the listen backlog never overflows.
  for (let i = 0; i < N; i += 100) {
    await Promise.all(Array.from({ length: Math.min(100, N - i) }, (_, k) => open(i + k)));
  }
}

process.on('message', async (m) => {
  if (m.cmd === 'connect') {
    try {
      await connectAll();
      process.send({ connected: N });
    } catch (e) {
      process.send({ error: e.message });
    }
  } else if (m.cmd === 'reset') {
    delivered = 0;
    lastAt = 0;
    samples = [];
    process.send({ reset: true });
  } else if (m.cmd === 'stats') {
    const sorted = Float64Array.from(samples).sort();
    const pct = (p) =>
      sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] : NaN;
    process.send({ delivered, lastAt, p50: pct(0.5), p99: pct(0.99), sampled: sorted.length });
  } else if (m.cmd === 'close') {
    for (const c of closers) c();
    process.exit(0);
  }
});
