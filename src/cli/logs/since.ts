// `svc logs --since`: a duration back from now (10m, 1h30m, 2d, as everywhere in svc) or a
// time, `2026-05-03`, `2026-05-03 17:30`, `2026-05-03T17:30:05` (local time, as journalctl
// reads it) or with a zone (`…Z`, `…+02:00`).
import { parseDuration } from '../../lib/duration.js';

const TIME = /^(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,3}))?)?)?(Z|[+-]\d\d:\d\d)?$/;

/** Epoch ms of `text` relative to `now`; throws an Error saying what is accepted. */
export function parseSince(text: string, now: number): number {
  const s = text.trim();
  if (/^\d/.test(s) && !s.includes('-')) {
    try {
      return now - parseDuration(s);
    } catch {
      // reported below
    }
  }
  const m = TIME.exec(s);
  if (m) {
    const [y, mo, d, h, mi, sec] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0)) as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const ms = m[7] ? Number(m[7].padEnd(3, '0')) : 0;
    const zone = m[8];
    // Without a zone the fields are local time; with one, UTC shifted by the offset.
    const fields = zone
      ? new Date(Date.UTC(y, mo - 1, d, h, mi, sec, ms))
      : new Date(y, mo - 1, d, h, mi, sec, ms);
    const sameDay = zone
      ? fields.getUTCMonth() === mo - 1 && fields.getUTCDate() === d
      : fields.getMonth() === mo - 1 && fields.getDate() === d;
    if (sameDay && h < 24 && mi < 60 && sec < 60) {
      let t = fields.getTime();
      if (zone && zone !== 'Z') {
        const sign = zone.startsWith('-') ? -1 : 1;
        t -= sign * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6))) * 60_000;
      }
      return t;
    }
  }
  throw new Error(
    `invalid --since "${text}": a duration back from now (30s, 10m, 1h30m, 2d) or a time (2026-05-03, 2026-05-03 17:30, 2026-05-03T17:30:00Z)`,
  );
}

/** `-n`: a number of lines, or `all`. */
export function parseLines(text: string): number {
  if (text === 'all') return Number.POSITIVE_INFINITY;
  if (/^\d+$/.test(text)) return Number(text);
  throw new Error(`invalid --lines "${text}": a number of lines (0 or more) or "all"`);
}
