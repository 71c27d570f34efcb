// Feed health for the doctor: reads the fan-out's status (upstream state, reconnect times,
// rate-limit pauses) leniently, since older svcd builds expose less, and judges the last hour.
import type { DoctorFacts } from './facts.js';
import type { Check } from './report.js';

/** "Recent" for reconnects and rate-limit pauses. */
export const RECENT_MS = 60 * 60_000;
/** More reconnects than this within RECENT_MS is a flapping upstream (docs/fanout.md, Status). */
export const FLAPPING_RECONNECTS = 3;

export interface FanoutHealth {
  enabled: boolean | null;
  /** null when the status does not say. */
  upstreamUp: boolean | null;
  upstreamDetail: string | null;
  reconnects: number[];
  throttles: { start: number; end: number | null }[];
  throttledNow: boolean | null;
}

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === 'object' && v !== null && !Array.isArray(v);

function time(v: unknown): number | null {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v !== 'string') return null;
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : t;
}

function firstTime(r: Rec, keys: string[]): number | null {
  for (const k of keys) {
    const t = time(r[k]);
    if (t !== null) return t;
  }
  return null;
}

/**
 * svcd's `fanout.status` (src/daemon/fanout): `{enabled, upstream: {state, reconnects, outages},
 * rate_limit: {holding, throttles}}`; also accepts flat `reconnects`/`throttles`/`throttled`
 * and `upstream: 'up'|'down'` so a status from another build still reads.
 */
function upstreamOf(s: Rec): { up: boolean | null; detail: string | null } {
  const u = s.upstream;
  const state = (v: unknown): boolean | null =>
    v === 'up' || v === 'connected' ? true : v === 'down' ? false : null;
  if (typeof u === 'string') return { up: state(u), detail: null };
  if (!isRec(u)) return { up: typeof s.connected === 'boolean' ? s.connected : null, detail: null };
  const up = typeof u.connected === 'boolean' ? u.connected : state(u.state);
  // svcd's fan-out keeps its outages ({down_at, up_at, status, error}); the last one says why.
  const outages = Array.isArray(u.outages) ? u.outages.filter(isRec) : [];
  const last = outages.at(-1) ?? {};
  const bits: string[] = [];
  const status = u.last_status ?? last.status;
  const error = u.last_error ?? last.error;
  const since = u.since ?? last.down_at;
  if (status !== undefined && status !== null) bits.push(`status ${String(status)}`);
  if (typeof error === 'string') bits.push(error);
  if (typeof since === 'string') bits.push(`since ${since}`);
  return { up, detail: bits.length ? bits.join(', ') : null };
}

export function readFanoutStatus(s: Rec): FanoutHealth {
  const { up, detail } = upstreamOf(s);
  const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
  const u = isRec(s.upstream) ? s.upstream : {};
  const rl = isRec(s.rate_limit) ? s.rate_limit : {};
  const reconnects = list(s.reconnects ?? u.reconnects)
    .map((r) => (isRec(r) ? firstTime(r, ['at', 'time', 'ts']) : time(r)))
    .filter((t): t is number => t !== null);
  const throttles = list(s.throttles ?? rl.throttles)
    .map((r) => {
      if (!isRec(r)) {
        const t = time(r);
        return t === null ? null : { start: t, end: null };
      }
      const start = firstTime(r, ['start', 'started_at', 'since', 'at']);
      return start === null
        ? null
        : { start, end: firstTime(r, ['end', 'released_at', 'until', 'reset_at']) };
    })
    .filter((t): t is { start: number; end: number | null } => t !== null);
  const paused = s.throttled ?? rl.holding;
  return {
    enabled: typeof s.enabled === 'boolean' ? s.enabled : null,
    upstreamUp: up,
    upstreamDetail: detail,
    reconnects,
    throttles,
    throttledNow: typeof paused === 'boolean' ? paused : null,
  };
}

export function feedCheck(f: DoctorFacts): Check {
  const name = 'feed';
  if (f.fanout.source === null) {
    return {
      name,
      status: 'warn',
      detail: `not available: ${f.fanout.reason}`,
      hint: f.daemon.status ? 'this svcd does not report fan-out health; update svc' : 'svc daemon up',
    };
  }
  const h = readFanoutStatus(f.fanout.status);
  if (h.enabled === false) {
    return { name, status: 'ok', detail: 'local fan-out disabled ([fanout] in config.toml)', hint: null };
  }
  const since = f.now - RECENT_MS;
  const recentReconnects = h.reconnects.filter((t) => t >= since);
  const recentThrottles = h.throttles.filter((t) => (t.end ?? f.now) >= since);
  const iso = (t: number) => new Date(t).toISOString();
  const parts: string[] = [];
  parts.push(
    h.upstreamUp === false
      ? 'upstream down'
      : h.upstreamUp === true
        ? 'upstream up'
        : 'upstream state unknown',
  );
  if (h.upstreamUp === false && h.upstreamDetail) parts[0] += ` (${h.upstreamDetail})`;
  const lastReconnect = recentReconnects.length ? ` (last ${iso(Math.max(...recentReconnects))})` : '';
  parts.push(`${recentReconnects.length} reconnects in the last hour${lastReconnect}`);
  const lastThrottle = recentThrottles.length
    ? ` (last from ${iso(Math.max(...recentThrottles.map((t) => t.start)))})`
    : '';
  parts.push(`${recentThrottles.length} rate-limit pauses in the last hour${lastThrottle}`);
  if (h.throttledNow) parts.push('retransmission paused by the rate limit now');
  const detail = parts.join('; ');

  if (h.upstreamUp === false) {
    return {
      name,
      status: 'warn',
      detail,
      hint: 'repair "tower" and "tower_auth"; the fan-out reconnects by itself',
    };
  }
  if (h.throttledNow || recentThrottles.length > 0) {
    return {
      name,
      status: 'warn',
      detail,
      hint: "the tower's feed rate limit is being reached: narrow the fan-out's upstream filters or raise the limit on the tower",
    };
  }
  if (recentReconnects.length > FLAPPING_RECONNECTS) {
    return {
      name,
      status: 'warn',
      detail,
      hint: 'the upstream feed keeps dropping: check the network path and the tower logs',
    };
  }
  return { name, status: 'ok', detail, hint: null };
}
