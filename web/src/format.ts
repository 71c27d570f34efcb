// How the console writes times, durations and sizes: relative times for scanning ("3 min
// ago"), the full local time on hover. Pure functions (tested in format.test.ts).

/** "just now", "42 s ago", "3 min ago", "2 h ago", "5 d ago"; "in 3 min" for the future. */
export function ago(iso: string | number, now: number): string {
  const t = typeof iso === 'number' ? iso : Date.parse(iso);
  if (!Number.isFinite(t)) return '—';
  const s = Math.round((now - t) / 1000);
  const abs = Math.abs(s);
  if (abs < 5) return 'just now';
  const text =
    abs < 60
      ? `${abs} s`
      : abs < 3600
        ? `${Math.floor(abs / 60)} min`
        : abs < 86_400
          ? `${Math.floor(abs / 3600)} h`
          : `${Math.floor(abs / 86_400)} d`;
  return s >= 0 ? `${text} ago` : `in ${text}`;
}

/** "850 ms", "12.3 s", "4 min 5 s", "2 h 3 min". */
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** "512 B", "1.5 KiB", "12.0 MiB", "1.2 GiB". */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** The full local date and time, for hovers. */
export function fullTime(iso: string | number): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}
