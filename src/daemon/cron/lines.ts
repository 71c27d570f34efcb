// Where keys are in cron.toml (top-level keys, each [[job]] header and its keys), for messages
// about values smol-toml parsed fine but config.ts rejects. A line scanner, not a parser.

export interface LineMap {
  /** Top-level key → line. */
  top: Map<string, number>;
  /** Each [[job]] header in order: its line and its keys' lines. */
  jobs: { line: number; fields: Map<string, number> }[];
}

/**
 * Where keys are in the file, for messages about values smol-toml parsed fine but we reject.
 * A line scanner, not a parser: it knows table headers, `key =` lines and multi-line strings,
 * which is all cron.toml uses; anything it cannot place falls back to the job's header line.
 */
export function locateLines(text: string): LineMap {
  const map: LineMap = { top: new Map(), jobs: [] };
  let section: 'top' | 'job' | 'other' = 'top';
  let openString: '"""' | "'''" | null = null;
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const n = i + 1;
    if (openString) {
      if (count(line, openString) % 2 === 1) openString = null;
      continue;
    }
    if (/^\s*\[\[\s*("job"|'job'|job)\s*\]\]/.test(line)) {
      section = 'job';
      map.jobs.push({ line: n, fields: new Map() });
    } else if (/^\s*\[/.test(line)) {
      section = 'other';
    } else {
      const key = /^\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*=/.exec(line);
      if (key) {
        const k = key[1] ?? key[2] ?? key[3] ?? '';
        const target = section === 'top' ? map.top : section === 'job' ? map.jobs.at(-1)?.fields : undefined;
        if (target && !target.has(k)) target.set(k, n);
      }
    }
    for (const q of ['"""', "'''"] as const) {
      if (count(line, q) % 2 === 1) {
        openString = q;
        break;
      }
    }
  }
  return map;
}

function count(s: string, sub: string): number {
  return s.split(sub).length - 1;
}
