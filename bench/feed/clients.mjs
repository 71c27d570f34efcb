// Subscribers of bench/feed, in their own process: N SSE streams on the tower or N socket.io
// clients, each event's publish→receive latency taken from the publisher's timestamp in the
// payload (same machine, so wall clocks agree). Driven over IPC by index.mjs.
// SAMPLED subscribers, spread evenly over the connection order (servers write to their
// streams in about that order, so the first ones would see only the start of each fan-out),
// are full clients (every event parsed; node:http SSE for svc, socket.io-client for
// socket.io). The others only count events, straight from the bytes of their raw TCP socket
// (SSE: `id:` lines; socket.io: engine.io `42` event packets in WebSocket frames), read
// into one buffer they all share, so the subscribers' process, which shares the machine with
// the server, measures the server rather than itself; both peers' counting readers do the
// same minimal work (counters.mjs), on the bytes of their own read only.
// Counts are kept per subscriber, and the sampled ones also note each event's `seq`, so
// index.mjs can check that every subscriber got every event exactly once.
// PART (all, sampled, counting) lets a run put the sampled subscribers in a process of their
// own (harness.mjs splitClientsFor): one that parses 100 streams and waits for the CPU behind
// nobody's counting of the 9 900 others, so its latency is the system's, not the harness's.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { io } from 'socket.io-client';
import WebSocket from 'ws';
import { sseCounter, wsFrames } from './counters.mjs';

const [kind, urlList, token, nText, part = 'all'] = process.argv.slice(2);
// Several servers (comma-separated): subscriber i connects to the (i mod count)-th, e.g. two
// load balancers where one could not hold every stream within its file-descriptor limit.
const urls = urlList.split(',');
const url = urls[0];
const urlOf = (i) => urls[i % urls.length];
const N = Number(nText);
/** Latency is sampled on every STRIDE-th subscriber only (all of them count deliveries). */
const SAMPLED = 100;
const STRIDE = Math.max(1, Math.floor(N / SAMPLED));
const sampled = (i) => i % STRIDE === 0 && i / STRIDE < SAMPLED;
/** Whether subscriber i is this process's (PART). */
const mine = (i) => part === 'all' || (part === 'sampled') === sampled(i);
const now = () => performance.timeOrigin + performance.now();

/**
 * The subscribers' own event-loop lag (timer delay, 1 ms resolution): an event that arrives
 * while this process is busy or paused (GC) waits in its socket, and that wait is counted in
 * its latency; reported beside the latency so the harness's share of it shows.
 */
const lag = monitorEventLoopDelay({ resolution: 1 });
lag.enable();

let delivered = 0;
let lastAt = 0;
let samples = [];
/** Events each subscriber received since the last reset. */
const perSubscriber = new Uint32Array(N);
/** The `seq`s each sampled subscriber received since the last reset, and the repeats. */
let seqs = new Map();
let repeats = 0;
const closers = [];

function onEvent(i, payload) {
  delivered++;
  perSubscriber[i]++;
  const at = now();
  lastAt = at;
  if (!sampled(i)) return;
  samples.push(at - payload.t);
  let seen = seqs.get(i);
  if (!seen) {
    seen = new Set();
    seqs.set(i, seen);
  }
  if (seen.has(payload.seq)) repeats++;
  else seen.add(payload.seq);
}

function counted(i, n) {
  if (n === 0) return;
  delivered += n;
  perSubscriber[i] += n;
  lastAt = now();
}

/** The counts since the last reset: in all, the fewest and most per subscriber, repeats. */
function counts() {
  let min = Number.POSITIVE_INFINITY;
  let max = 0;
  let subscribers = 0;
  for (let i = 0; i < N; i++) {
    if (!mine(i)) continue;
    const n = perSubscriber[i];
    subscribers++;
    if (n < min) min = n;
    if (n > max) max = n;
  }
  return { delivered, min: subscribers > 0 ? min : 0, max, repeats, subscribers };
}

/**
 * Counting readers read their socket into one Buffer shared by all of them (net's `onread`:
 * no allocation, stream or parser per read) and look at the bytes in place. Both peers'
 * counting readers are built this way, so the subscribers' process, which shares the machine
 * with the server, spends little on them and measures the server rather than itself.
 */
const READ_BUFFER = Buffer.allocUnsafe(256 * 1024);

/**
 * A raw TCP connection to the server under test: sends `request`, reads the response head
 * (an error unless its status line starts with `status`, e.g. 'HTTP/1.1 200'), then hands
 * `onHead` nothing more and `onBody(buf, from, to)` every byte after the head, the head's
 * own read included.
 */
function rawConnect(base, request, status, { onHead, onBody, onError }) {
  const u = new URL(base);
  let head = '';
  const onBytes = (buf, n) => {
    if (head === null) return onBody(buf, 0, n);
    head += buf.toString('latin1', 0, n);
    const end = headEnd(head);
    if (end < 0) return;
    if (!head.startsWith(status)) return onError(new Error(head.split('\r\n')[0]));
    const rest = Buffer.from(head.slice(end), 'latin1');
    head = null;
    onHead();
    onBody(rest, 0, rest.length);
  };
  const socket = net.connect({
    host: u.hostname,
    port: Number(u.port),
    onread: { buffer: READ_BUFFER, callback: (n, buf) => onBytes(buf, n) },
  });
  socket.setNoDelay(true);
  socket.once('connect', () => socket.write(request));
  socket.once('error', onError);
  closers.push(() => socket.destroy());
  return socket;
}

/** Bytes up to the end of an HTTP response head, or -1 while it is incomplete. */
function headEnd(text) {
  const at = text.indexOf('\r\n\r\n');
  return at < 0 ? -1 : at + 4;
}

/** A counting SSE reader: GET /events/stream over a raw socket, events' `id:` lines counted. */
function openSseCounter(i) {
  return new Promise((resolve, reject) => {
    const { host } = new URL(urlOf(i));
    const count = sseCounter();
    rawConnect(
      urlOf(i),
      `GET /events/stream?type=progress HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${token}\r\naccept: text/event-stream\r\n\r\n`,
      'HTTP/1.1 200',
      { onHead: resolve, onBody: (buf, from, to) => counted(i, count(buf, from, to)), onError: reject },
    );
  });
}

function openSse(i) {
  if (!sampled(i)) return openSseCounter(i);
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${urlOf(i)}/events/stream?type=progress`,
      { agent: false, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}`));
        closers.push(() => req.destroy());
        res.setEncoding('utf8');
        let buf = '';
        res.on('data', (chunk) => {
          buf += chunk;
          let at = 0;
          let end = buf.indexOf('\n\n');
          while (end >= 0) {
            // Feed events only: `retry:`, comments and a `reset` carry no `id:` line.
            const block = buf.slice(at, end);
            const d = block.indexOf('\ndata: ');
            if (block.startsWith('id: ') && d >= 0) onEvent(i, JSON.parse(block.slice(d + 7)).payload);
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
    const ws = new WebSocket(`${urlOf(i).replace(/^http/, 'ws')}/events/ws?type=progress`, {
      headers: { authorization: `Bearer ${token}` },
      perMessageDeflate: false,
    });
    if (sampled(i)) ws.on('message', (data) => onEvent(i, JSON.parse(data).payload));
    else ws.on('message', () => counted(i, 1));
    ws.once('open', resolve);
    ws.once('error', reject);
    closers.push(() => ws.terminate());
  });
}

/** A WebSocket frame from the client: text, FIN, masked with a zero key (any key is valid). */
function clientFrame(text) {
  const payload = Buffer.from(text);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length, 0, 0, 0, 0]), payload]);
}

/**
 * A counting socket.io reader: engine.io 4 over a raw WebSocket (handshake, frame headers
 * parsed in place, open/ping/connect answered, `42` event packets counted).
 */
function openSocketIoCounter(i) {
  return new Promise((resolve, reject) => {
    const { host } = new URL(url);
    let socket = null;
    // Engine.io packet types: 0 open, 2 ping, 4 message; socket.io 0 connect, 2 event.
    const frames = wsFrames((a, b) => {
      if (a === 0x34 && b === 0x32) counted(i, 1);
      else if (a === 0x32) socket.write(clientFrame('3'));
      else if (a === 0x30) socket.write(clientFrame('40'));
      else if (a === 0x34 && b === 0x30) resolve();
    });
    socket = rawConnect(
      url,
      `GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nhost: ${host}\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: ${randomBytes(16).toString('base64')}\r\n\r\n`,
      'HTTP/1.1 101',
      // Open once socket.io's connect packet arrives (the frame callback resolves).
      { onHead: () => {}, onBody: frames, onError: reject },
    );
  });
}

function openSocketIo(i) {
  if (!sampled(i)) return openSocketIoCounter(i);
  return new Promise((resolve, reject) => {
    const s = io(url, { transports: ['websocket'], forceNew: true, reconnection: false });
    s.on('event', (ev) => onEvent(i, ev.payload));
    s.once('connect', resolve);
    s.once('connect_error', reject);
    closers.push(() => s.close());
  });
}

/** Opens this process's subscribers among [from, to), in waves so the listen backlog never overflows. */
async function connectRange(from, to) {
  const open = kind === 'svc' || kind === 'svc-base' ? openSse : kind === 'svc-ws' ? openWs : openSocketIo;
  for (let i = from; i < to; i += 100) {
    const wave = Array.from({ length: Math.min(100, to - i) }, (_, k) => i + k).filter(mine);
    await Promise.all(wave.map(open));
  }
}

process.on('message', async (m) => {
  if (m.cmd === 'connect') {
    try {
      await connectRange(m.from ?? 0, m.to ?? N);
      process.send({ connected: N });
    } catch (e) {
      process.send({ error: e.message });
    }
  } else if (m.cmd === 'reset') {
    // Answers the counts of the step that ends here (deliveries that came after its wait
    // ended included), then starts the next one from zero.
    const before = counts();
    delivered = 0;
    lastAt = 0;
    samples = [];
    perSubscriber.fill(0);
    seqs = new Map();
    repeats = 0;
    lag.reset();
    process.send(before);
  } else if (m.cmd === 'stats') {
    const sorted = Float64Array.from(samples).sort();
    const pct = (p) =>
      sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] : NaN;
    process.send({
      ...counts(),
      lastAt,
      p50: pct(0.5),
      p99: pct(0.99),
      sampled: sorted.length,
      lagP99: lag.percentile(99) / 1e6,
      lagMax: lag.max / 1e6,
    });
  } else if (m.cmd === 'close') {
    for (const c of closers) c();
    process.exit(0);
  }
});
