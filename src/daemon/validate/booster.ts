// The Wasm booster (docs/validation.md): a module exporting `memory`,
// `alloc(len) -> ptr` and `validate(ptr, len) -> i32` judges each MCP call's payload. A
// module from --booster-wasm runs in a worker thread, so one that loops is terminated at the
// time limit and one that traps only fails its call; neither can take svcd down. It must not
// decide anything else: what a verdict means is pipeline.ts's.
import { readFile } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';
import type { Clock } from '../../lib/clock.js';

export type BoosterVerdict = 'reject' | 'pass' | 'short_circuit';

export type BoosterOutcome = { verdict: BoosterVerdict } | { verdict: 'error'; reason: string };

export interface Booster {
  /** "embedded", or the module's path. */
  readonly source: string;
  /** Why the module cannot run (bad file, missing exports); every check then errors. */
  readonly loadError: string | null;
  check(payload: Uint8Array): Promise<BoosterOutcome>;
  close(): Promise<void>;
}

/** A call running longer than this is a loop: its worker is terminated and the call fails. */
export const DEFAULT_BOOSTER_TIME_LIMIT_MS = 250;

const VERDICTS: Record<number, BoosterVerdict> = { 0: 'reject', 1: 'pass', 2: 'short_circuit' };

export function verdictOf(code: number): BoosterOutcome {
  const v = VERDICTS[code];
  return v
    ? { verdict: v }
    : {
        verdict: 'error',
        reason: `validate() returned ${code}: expected 0 (reject), 1 (pass) or 2 (answer)`,
      };
}

/**
 * The embedded default (no --booster-wasm): passes a non-empty payload, rejects an empty one.
 * Source, also the reference for module authors (docs/validation.md):
 *   (module
 *     (memory (export "memory") 1)
 *     (func (export "alloc") (param $len i32) (result i32)
 *       (local $need i32)
 *       (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $len) (i32.const 65535))
 *                                            (i32.const 16)) (memory.size)))
 *       (if (i32.gt_s (local.get $need) (i32.const 0))
 *         (then (drop (memory.grow (local.get $need)))))
 *       (i32.const 0))
 *     (func (export "validate") (param $ptr i32) (param $len i32) (result i32)
 *       (i32.gt_s (local.get $len) (i32.const 0))))
 */
export const EMBEDDED_BOOSTER_WASM = Buffer.from(
  'AGFzbQEAAAABDAJgAX8Bf2ACf38BfwMDAgABBQMBAAEHHQMGbWVtb3J5AgAFYWxsb2MAAAh2YWxpZGF0ZQABCiwCIgEBfyAAQf//A2pBEHY/AGshASABQQBKBEAgAUAAGgtBAAsHACABQQBKCw==',
  'base64',
);

interface BoosterExports {
  memory: WebAssembly.Memory;
  alloc(len: number): number;
  validate(ptr: number, len: number): number;
}

/** Checks the module's shape; returns why it cannot be a booster, or null. */
export function shapeError(mod: WebAssembly.Module): string | null {
  const exports = new Map(WebAssembly.Module.exports(mod).map((e) => [e.name, e.kind]));
  const missing = [
    ['memory', 'memory'],
    ['alloc', 'function'],
    ['validate', 'function'],
  ]
    .filter(([name, kind]) => exports.get(name as string) !== kind)
    .map(([name, kind]) => `${name} (${kind})`);
  if (missing.length > 0) return `the module does not export ${missing.join(', ')}`;
  const imports = WebAssembly.Module.imports(mod);
  if (imports.length > 0) {
    return `the module imports ${imports.map((i) => `${i.module}.${i.name}`).join(', ')}; boosters get no imports`;
  }
  return null;
}

/** Copies the payload into the instance's memory and runs validate(); traps throw. */
function runInstance(ex: BoosterExports, payload: Uint8Array): number {
  const ptr = ex.alloc(payload.length) >>> 0;
  const mem = new Uint8Array(ex.memory.buffer);
  if (ptr + payload.length > mem.length) {
    throw new Error(
      `alloc(${payload.length}) returned ${ptr}: outside the module's memory (${mem.length} bytes)`,
    );
  }
  mem.set(payload, ptr);
  return ex.validate(ptr, payload.length);
}

/** The embedded default runs in-process: it is ours, it cannot loop. */
export function embeddedBooster(): Booster {
  // Instantiated on the first check: compiling Wasm pages in V8's Wasm compiler, ≈0.6 MiB of
  // RSS that a daemon which never validates an MCP call would keep (docs/perf-notes.md, daemon).
  let ex: BoosterExports | null = null;
  return {
    source: 'embedded',
    loadError: null,
    check: async (payload) => {
      ex ??= new WebAssembly.Instance(new WebAssembly.Module(EMBEDDED_BOOSTER_WASM), {})
        .exports as unknown as BoosterExports;
      return verdictOf(runInstance(ex, payload));
    },
    close: async () => {},
  };
}

// The worker and svcd share two buffers: `ctrl` (Int32: request seq, reply seq, verdict,
// length, error flag) and `data` (the payload in, an error message out). The worker blocks in
// Atomics.wait and svcd in Atomics.waitAsync: a call costs two thread wake-ups and no message
// serialization (about half the latency of postMessage, see BENCHMARKS.md ## validate).
const REQ = 0;
const REPLY = 1;
const CODE = 2;
const LEN = 3;
const FAILED = 4;
/** mcp.call arrives on one mgmt.sock line, so its JSON payload fits in this (MGMT_MAX_LINE_BYTES). */
const DATA_BYTES = 1024 * 1024 + 1024;

// Plain JS (eval'd), so the same code runs from src/ under vitest and from dist/.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const mod = workerData.module;
const ctrl = new Int32Array(workerData.ctrl);
const data = new Uint8Array(workerData.data);
let ex = null;
const instantiate = () => { ex = new WebAssembly.Instance(mod, {}).exports; };
const message = (e) => (e instanceof WebAssembly.RuntimeError ? 'trapped: ' : '') + (e && e.message ? e.message : String(e));
function run(len) {
  if (!ex) instantiate();
  const ptr = ex.alloc(len) >>> 0;
  const mem = new Uint8Array(ex.memory.buffer);
  if (ptr + len > mem.length) {
    throw new Error('alloc(' + len + ') returned ' + ptr + ': outside the module\\'s memory (' + mem.length + ' bytes)');
  }
  mem.set(data.subarray(0, len), ptr);
  return ex.validate(ptr, len);
}
try {
  instantiate();
  parentPort.postMessage({ ready: true });
} catch (e) {
  parentPort.postMessage({ ready: false, error: message(e) });
}
// Fresh buffers: no request before ready, and reading it after posting ready would race.
let last = 0;
for (;;) {
  Atomics.wait(ctrl, ${REQ}, last);
  last = Atomics.load(ctrl, ${REQ});
  try {
    ctrl[${CODE}] = run(ctrl[${LEN}]);
    ctrl[${FAILED}] = 0;
  } catch (e) {
    // After a trap the instance's memory may be half-written: the next call gets a fresh one.
    ex = null;
    const text = new TextEncoder().encode(message(e)).subarray(0, 4096);
    data.set(text);
    ctrl[${LEN}] = text.length;
    ctrl[${FAILED}] = 1;
  }
  Atomics.store(ctrl, ${REPLY}, last);
  Atomics.notify(ctrl, ${REPLY});
}
`;

type WaitResult = 'ok' | 'not-equal' | 'timed-out';
/** Atomics.waitAsync (Node >= 16; typed only from lib es2024, newer than ours). */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(
      a: Int32Array,
      index: number,
      value: number,
      timeoutMs: number,
    ): { async: false; value: WaitResult } | { async: true; value: Promise<WaitResult> };
  }
).waitAsync;

/** Starting a worker is not the module's run: it gets its own, generous, limit. */
const STARTUP_LIMIT_MS = 10_000;

interface Slot {
  worker: Worker;
  ctrl: Int32Array;
  data: Uint8Array;
  /** null once the instance is up, else why it cannot start. */
  ready: Promise<string | null>;
  /** Resolves with a reason when the worker dies. */
  died: Promise<string>;
}

/**
 * A module from a file, run in a worker thread started at load. Calls are serialized (one in
 * flight), so the time limit measures the module's own run, not a queue or a worker start. A
 * load failure is not thrown: loadError says why and every call fails with it (fail closed;
 * svcd keeps running).
 */
export async function loadBooster(
  path: string,
  opts: { clock: Clock; timeLimitMs?: number },
): Promise<Booster> {
  const timeLimitMs = opts.timeLimitMs ?? DEFAULT_BOOSTER_TIME_LIMIT_MS;
  let mod: WebAssembly.Module | null = null;
  let loadError: string | null = null;
  try {
    mod = await WebAssembly.compile(await readFile(path));
    const bad = shapeError(mod);
    if (bad) loadError = `booster ${path}: ${bad}`;
  } catch (e) {
    loadError = `booster ${path}: ${(e as Error).message}`;
  }

  let slot: Slot | null = null;
  let tail: Promise<unknown> = Promise.resolve();
  let closed = false;

  const drop = (s: Slot) => {
    if (slot === s) slot = null;
    void s.worker.terminate();
  };
  const spawn = (m: WebAssembly.Module): Slot => {
    const ctrl = new Int32Array(new SharedArrayBuffer(5 * 4));
    const data = new Uint8Array(new SharedArrayBuffer(DATA_BYTES));
    const w = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { module: m, ctrl: ctrl.buffer, data: data.buffer },
      // The module's own memory is Wasm memory; this bounds the worker's JS heap only.
      resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16 },
    });
    let started: (why: string | null) => void = () => {};
    const ready = new Promise<string | null>((resolve) => {
      const timer = opts.clock.setTimeout(
        () => resolve(`the module did not start within ${STARTUP_LIMIT_MS} ms`),
        STARTUP_LIMIT_MS,
      );
      started = (why) => {
        timer.cancel();
        resolve(why);
      };
    });
    const died = new Promise<string>((resolve) => {
      w.on('error', (e) => {
        started(`booster worker failed: ${e.message}`);
        resolve(`booster worker failed: ${e.message}`);
      });
      w.on('exit', () => {
        if (slot?.worker === w) slot = null;
        started('booster worker exited');
        resolve('booster worker exited');
      });
    });
    w.on('message', (msg: { ready?: boolean; error?: string }) => {
      started(msg.ready ? null : `booster ${path}: ${msg.error ?? 'cannot start'}`);
    });
    // An idle worker must not keep svcd (or a test) alive; a call refs it while it waits.
    w.unref();
    return { worker: w, ctrl, data, ready, died };
  };

  const runOne = async (payload: Uint8Array): Promise<BoosterOutcome> => {
    if (loadError || !mod) return { verdict: 'error', reason: loadError ?? 'no module' };
    if (closed) return { verdict: 'error', reason: 'booster is closed' };
    if (payload.length > DATA_BYTES) {
      return {
        verdict: 'error',
        reason: `payload of ${payload.length} bytes exceeds the booster's ${DATA_BYTES}`,
      };
    }
    slot ??= spawn(mod);
    const s = slot;
    const notStarted = await s.ready;
    if (notStarted) {
      drop(s);
      return { verdict: 'error', reason: notStarted };
    }
    const { ctrl, data } = s;
    data.set(payload);
    ctrl[LEN] = payload.length;
    const before = Atomics.load(ctrl, REPLY);
    const seq = (Atomics.add(ctrl, REQ, 1) + 1) | 0;
    Atomics.notify(ctrl, REQ);
    const wait = waitAsync(ctrl, REPLY, before, timeLimitMs);
    // A pending waitAsync does not keep the event loop alive; the worker handle does.
    s.worker.ref();
    try {
      const outcome = wait.async ? await Promise.race([wait.value, s.died]) : wait.value;
      if (Atomics.load(ctrl, REPLY) !== seq) {
        drop(s);
        // A loop cannot be interrupted from inside: the worker goes, the next call gets a new one.
        if (outcome === 'timed-out') {
          return { verdict: 'error', reason: `validate() ran longer than the ${timeLimitMs} ms time limit` };
        }
        return { verdict: 'error', reason: outcome === 'ok' ? 'booster worker out of step' : outcome };
      }
    } finally {
      s.worker.unref();
    }
    if (ctrl[FAILED] === 1) {
      return { verdict: 'error', reason: new TextDecoder().decode(data.slice(0, ctrl[LEN])) };
    }
    return verdictOf(ctrl[CODE] ?? -1);
  };

  // Warm: the first call should not pay for a worker start.
  if (mod && !loadError) slot = spawn(mod);

  return {
    source: path,
    loadError,
    check(payload) {
      const run = tail.then(() => runOne(payload));
      tail = run;
      return run;
    },
    async close() {
      closed = true;
      await tail;
      const s = slot;
      slot = null;
      await s?.worker.terminate();
    },
  };
}
