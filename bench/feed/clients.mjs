// Subscribers of bench/feed, in their own process: N SSE streams on the tower or N socket.io
// clients, each event's publish→receive latency taken from the publisher's timestamp in the
// payload (same machine, so wall clocks agree). Driven over IPC by index.mjs.
// SAMPLED subscribers, spread evenly over the connection order (servers write to their
// streams in about that order, so the first ones would see only the start of each fan-out),
// are full clients (every event parsed; node:http SSE for svc, socket.io-client for
// socket.io). The others only count events, straight from the bytes of their raw TCP socket
// (SSE: `data:` lines; socket.io: engine.io `42` event packets in WebSocket frames), read
// into one buffer they all share, so the subscribers' process, which shares the machine with
// the server, measures the server rather than itself; both peers' counting readers do the
// same minimal work.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { io } from 'socket.io-client';
import WebSocket from 'ws';

const [kind, url, token, nText] = process.argv.slice(2);
const N = Number(nText);
/** Latency is sampled on every STRIDE-th subscriber only (all of them count deliveries). */
const SAMPLED = 100;
const STRIDE = Math.max(1, Math.floor(N / SAMPLED));
const sampled = (i) => i % STRIDE === 0 && i / STRIDE < SAMPLED;
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
function rawConnect(request, status, { onHead, onBody, onError }) {
  const u = new URL(url);
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

const MARKER = Buffer.from('\ndata: ');
/**
 * Counts SSE messages (`data:` lines) in the raw bytes of the response (HTTP chunk framing
 * never falls inside a marker: JSON escapes newlines, and framing adds none before `data:`),
 * with `partial` bytes of a marker left at the end of the previous read (the marker repeats
 * no prefix of itself, so that is all the state a split marker needs).
 */
function sseCounter() {
  let partial = 0;
  return (buf, from, to) => {
    let n = 0;
    if (partial > 0) {
      const take = Math.min(MARKER.length - partial, to - from);
      const matches = buf.compare(MARKER, partial, partial + take, from, from + take) === 0;
      if (!matches) partial = 0;
      else if (partial + take === MARKER.length) {
        n++;
        partial = 0;
      } else {
        partial += take;
        return n;
      }
    }
    let at = buf.indexOf(MARKER, from);
    while (at >= 0) {
      n++;
      at = buf.indexOf(MARKER, at + MARKER.length);
    }
    for (let k = Math.min(MARKER.length - 1, to - from); k > 0; k--) {
      if (buf.compare(MARKER, 0, k, to - k, to) === 0) {
        partial = k;
        break;
      }
    }
    return n;
  };
}

/** A counting SSE reader: GET /events/stream over a raw socket, `data:` lines counted. */
function openSseCounter() {
  return new Promise((resolve, reject) => {
    const { host } = new URL(url);
    const count = sseCounter();
    rawConnect(
      `GET /events/stream?type=progress HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${token}\r\naccept: text/event-stream\r\n\r\n`,
      'HTTP/1.1 200',
      { onHead: resolve, onBody: (buf, from, to) => counted(count(buf, from, to)), onError: reject },
    );
  });
}

function openSse(i) {
  if (!sampled(i)) return openSseCounter();
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${url}/events/stream?type=progress`,
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

/** A WebSocket frame from the client: text, FIN, masked with a zero key (any key is valid). */
function clientFrame(text) {
  const payload = Buffer.from(text);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length, 0, 0, 0, 0]), payload]);
}

/**
 * A counting socket.io reader: engine.io 4 over a raw WebSocket (handshake, frame headers
 * parsed in place, open/ping/connect answered, `42` event packets counted).
 */
function openSocketIoCounter() {
  return new Promise((resolve, reject) => {
    const { host } = new URL(url);
    // Frame parsing state: header bytes seen of the current frame, its payload bytes still
    // to skip, and the first two payload bytes (engine.io and socket.io packet types).
    const hdr = Buffer.alloc(14);
    let hdrLen = 0;
    let left = -1;
    let lead = [];
    let socket = null;
    const packet = (a, b) => {
      // Engine.io packet types: 0 open, 2 ping, 4 message; socket.io 0 connect, 2 event.
      if (a === 0x34 && b === 0x32) counted(1);
      else if (a === 0x32) socket.write(clientFrame('3'));
      else if (a === 0x30) socket.write(clientFrame('40'));
      else if (a === 0x34 && b === 0x30) resolve();
    };
    const frames = (buf, from, to) => {
      let at = from;
      while (at < to) {
        if (left < 0) {
          // Reading a header: 2 bytes, then 2 or 8 more for the length (server frames are unmasked).
          hdr[hdrLen++] = buf[at++];
          if (hdrLen < 2) continue;
          const len7 = hdr[1] & 0x7f;
          const need = len7 === 126 ? 4 : len7 === 127 ? 10 : 2;
          if (hdrLen < need) continue;
          left = len7 === 126 ? hdr.readUInt16BE(2) : len7 === 127 ? Number(hdr.readBigUInt64BE(2)) : len7;
          hdrLen = 0;
          lead = [];
          if (left === 0) {
            left = -1;
            continue;
          }
        }
        const take = Math.min(left, to - at);
        for (let k = 0; lead.length < 2 && k < take; k++) lead.push(buf[at + k]);
        at += take;
        left -= take;
        if (left === 0) {
          left = -1;
          packet(lead[0], lead[1]);
        }
      }
    };
    socket = rawConnect(
      `GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nhost: ${host}\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: ${randomBytes(16).toString('base64')}\r\n\r\n`,
      'HTTP/1.1 101',
      // Open once socket.io's connect packet arrives (packet() resolves).
      { onHead: () => {}, onBody: frames, onError: reject },
    );
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
  const open = kind === 'svc' || kind === 'svc-base' ? openSse : kind === 'svc-ws' ? openWs : openSocketIo;
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
    lag.reset();
    process.send({ reset: true });
  } else if (m.cmd === 'stats') {
    const sorted = Float64Array.from(samples).sort();
    const pct = (p) =>
      sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] : NaN;
    process.send({
      delivered,
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
