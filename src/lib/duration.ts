// Durations as operators write them: "90s", "15m", "1h30m", "2d" (and compounds of those).

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses a duration; throws an Error naming what is wrong. Bare numbers are rejected.
 * `allowMs: false` rejects the "ms" unit where the operator-facing units are s, m, h, d.
 */
export function parseDuration(text: string, opts: { allowMs?: boolean } = {}): number {
  const s = text.trim();
  const shape = opts.allowMs === false ? /^(\d+(s|m|h|d))+$/ : /^(\d+(ms|s|m|h|d))+$/;
  if (!shape.test(s)) {
    throw new Error(`invalid duration "${text}": use <N>s, <N>m, <N>h, <N>d or compounds such as 1h30m`);
  }
  let total = 0;
  for (const m of s.matchAll(/(\d+)(ms|s|m|h|d)/g)) total += Number(m[1]) * (UNIT_MS[m[2] ?? 's'] ?? 0);
  if (total <= 0) throw new Error(`invalid duration "${text}": must be greater than zero`);
  return total;
}

/** "1h30m5s" style rendering of a positive duration. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  let rest = Math.round(ms / 1000);
  const parts: string[] = [];
  for (const [unit, size] of [
    ['d', 86400],
    ['h', 3600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join('');
}

/** A duration rounded up to whole minutes (at least one): the cron tick cannot be finer. */
export function ceilToMinutes(ms: number): number {
  return Math.max(1, Math.ceil(ms / 60_000)) * 60_000;
}
