// Which lines of a log `svc logs` prints before following: the last N, of those not older
// than --since. A pino line carries its time; svcd's marks in an agent's output log
// (`--- <ISO time> started …`) carry theirs; any other line (an agent's own output) has none
// and is shown unless a later time in the same file, or the file's last write, proves it
// older than --since. Pure: the reader feeds lines and file ends.
import { parsePinoLine } from '../../lib/log-format.js';

const MARK = /^--- (\d{4}-\d\d-\d\dT[\d:.]+Z) /;

/** The time a line says it was written (epoch ms), or null. */
export function lineTime(line: string): number | null {
  const pino = parsePinoLine(line);
  if (pino) return pino.time;
  const m = MARK.exec(line);
  if (!m?.[1]) return null;
  const t = Date.parse(m[1]);
  return Number.isNaN(t) ? null : t;
}

export class TailWindow {
  private out: string[] = [];
  /** Lines without a time whose age is not known yet (since set, no time seen ≥ since). */
  private pending: string[] = [];
  /** The last time seen in the current file. */
  private lastTime: number | null = null;

  /**
   * @param n lines to keep (Infinity: all)
   * @param since epoch ms: drop lines known to be older (null: keep all)
   */
  constructor(
    private readonly n: number,
    private readonly since: number | null,
  ) {}

  line(text: string): void {
    if (this.since === null) {
      this.keep(text);
      return;
    }
    const t = lineTime(text);
    if (t !== null) {
      this.lastTime = t;
      if (t >= this.since) {
        this.flushPending();
        this.keep(text);
      } else {
        this.pending = [];
      }
      return;
    }
    if (this.lastTime !== null && this.lastTime >= this.since) {
      this.keep(text);
      return;
    }
    this.pending.push(text);
    // Only the last n lines can be printed: older pending ones never will be.
    if (this.pending.length > 2 * this.n) this.pending = this.pending.slice(-this.n);
  }

  /** The file ended; it was last written at `mtime` (epoch ms), which bounds its untimed lines. */
  endOfFile(mtime: number): void {
    if (this.since !== null && mtime >= this.since) this.flushPending();
    this.pending = [];
    this.lastTime = null;
  }

  lines(): string[] {
    return Number.isFinite(this.n) ? this.out.slice(-this.n) : this.out;
  }

  private flushPending(): void {
    for (const p of this.pending) this.keep(p);
    this.pending = [];
  }

  private keep(text: string): void {
    if (this.n === 0) return;
    this.out.push(text);
    if (this.out.length > 2 * this.n) this.out = this.out.slice(-this.n);
  }
}
