// Driving a tower process through store faults: writers that create domains without pause and
// record every answer, a feed reader that follows the feed across stream ends, and /readyz
// probes, each timed, so a test can say what clients saw during a fault and after it.
import { type OpenStream, openStream } from './feed-stream.js';

export interface Answer {
  /** Milliseconds since the load started, at the request's start and at its answer. */
  start: number;
  end: number;
  status: number;
  /** problem+json `code` of a failure. */
  code: string | null;
  retryAfter: string | null;
  /** The domain created (2xx), or the name asked for. */
  id: string | null;
  name: string;
}

/** A request that got no HTTP answer at all (connection refused, reset, the hang guard). */
const NO_ANSWER = 0;

/** Bounds a request that hangs: far above any deadline of the towers under test. */
const HANG_GUARD_MS = 60_000;

export interface Load {
  answers: Answer[];
  now(): number;
  stop(): Promise<void>;
}

export function startWriters(url: string, token: string, writers: number): Load {
  const t0 = performance.now();
  const now = () => performance.now() - t0;
  const answers: Answer[] = [];
  let stopped = false;
  let n = 0;
  const one = async () => {
    while (!stopped) {
      const name = `load-${n++}`;
      const start = now();
      let status = NO_ANSWER;
      let body: Record<string, unknown> = {};
      let retryAfter: string | null = null;
      try {
        const res = await fetch(`${url}/domains`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name }),
          signal: AbortSignal.timeout(HANG_GUARD_MS),
        });
        status = res.status;
        retryAfter = res.headers.get('retry-after');
        const text = await res.text();
        body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      } catch {
        status = NO_ANSWER;
      }
      answers.push({
        start,
        end: now(),
        status,
        code: typeof body.code === 'string' ? body.code : null,
        retryAfter,
        id: status === 201 && typeof body.id === 'string' ? body.id : null,
        name,
      });
      // A refused write is retried after a breath, as a client honouring Retry-After would
      // (scaled down: the test needs answers, not politeness).
      if (status !== 201) await new Promise((r) => setTimeout(r, 50));
    }
  };
  const running = Array.from({ length: writers }, one);
  return {
    answers,
    now,
    async stop() {
      stopped = true;
      await Promise.all(running);
    },
  };
}

export interface Probe {
  start: number;
  ms: number;
  status: number;
  detail: string;
}

/** One /readyz, timed. */
export async function probeReady(url: string, load: Load): Promise<Probe> {
  const start = load.now();
  try {
    const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(HANG_GUARD_MS) });
    const body = (await res.json()) as { detail?: string; status?: string };
    return { start, ms: load.now() - start, status: res.status, detail: body.detail ?? body.status ?? '' };
  } catch (e) {
    return { start, ms: load.now() - start, status: NO_ANSWER, detail: (e as Error).message };
  }
}

export interface Follower {
  /** Ids of the domains whose `created` event arrived, in arrival order, over every stream. */
  created(): string[];
  /** Streams opened (1 + reconnects). */
  streams(): number;
  close(): Promise<void>;
}

/** Follows the feed's domain events from the start, reopening (resume by id) when a stream ends. */
export function followDomains(url: string, token: string): Follower {
  const streams: OpenStream[] = [];
  let closed = false;
  const lastId = () => {
    for (let i = streams.length - 1; i >= 0; i--) {
      const got = (streams[i] as OpenStream).got;
      for (let j = got.length - 1; j >= 0; j--) {
        const id = got[j]?.id;
        if (id) return id;
      }
    }
    return '0';
  };
  const open = () => {
    streams.push(openStream(`${url}/events/stream?type=matrix`, token, { 'last-event-id': lastId() }));
  };
  open();
  const timer = setInterval(() => {
    if (!closed && streams[streams.length - 1]?.ended()) open();
  }, 50);
  return {
    created: () =>
      streams.flatMap((s) =>
        s.got.flatMap((m) => {
          const p = (m.data as { payload?: { entity?: string; action?: string; id?: string } }).payload;
          return m.event === 'message' && p?.entity === 'domain' && p.action === 'created' && p.id
            ? [p.id]
            : [];
        }),
      ),
    streams: () => streams.length,
    async close() {
      closed = true;
      clearInterval(timer);
      await Promise.all(streams.map((s) => s.close()));
    },
  };
}

/** Round to whole milliseconds for reports. */
export const ms = (x: number) => Math.round(x);

/** What clients saw of one fault, in milliseconds (the figures of docs/operations.md). */
export interface FaultReport {
  fault: string;
  /** Writes answered while the fault lasted (including those in flight when it began). */
  answers: number;
  refused: number;
  /** From the fault's start to the first refusal. */
  firstRefusedMs: number | null;
  /** The longest any of those writes waited for its answer. */
  slowestMs: number;
  /** /readyz during the fault and until ready again: status and time to answer. */
  readyz: { status: number; ms: number }[];
  /** From the fault's end to the first write acknowledged after it. */
  recoveredMs: number | null;
}

/** The report of a fault that began at `from` and was lifted at `lifted` (load.now() times). */
export function faultReport(
  fault: string,
  answers: Answer[],
  from: number,
  lifted: number,
  probes: Probe[],
): FaultReport {
  const during = answers.filter((a) => a.end >= from && a.start < lifted);
  const refused = during.filter((a) => a.status !== 201);
  const firstServed = answers.find((a) => a.start >= lifted && a.status === 201);
  return {
    fault,
    answers: during.length,
    refused: refused.length,
    firstRefusedMs: refused.length > 0 ? ms(Math.min(...refused.map((a) => a.end)) - from) : null,
    slowestMs: ms(Math.max(0, ...during.map((a) => a.end - a.start))),
    readyz: probes.map((p) => ({ status: p.status, ms: ms(p.ms) })),
    recoveredMs: firstServed ? ms(firstServed.end - lifted) : null,
  };
}
