// Agent output capture: appended to $SVC_HOME/svcd/logs/<name>.log and rotated by size
// (<name>.log.1 … .N), so a chatty agent can neither fill the disk nor grow svcd's memory.
// Writes are synchronous: nothing is buffered in memory, and a slow disk slows the reader
// of the agent's pipe, which in turn makes the agent wait (backpressure, not loss).
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';

export interface RotationPolicy {
  /** Rotate when the current file would exceed this many bytes. */
  maxBytes: number;
  /** Rotated files kept besides the current one. */
  keep: number;
  /**
   * Rotate before a write that does not fit instead of splitting it across two files (a write
   * larger than maxBytes is still split). For logs of whole lines (pino JSON): each file then
   * holds whole lines that tools read one file at a time.
   */
  wholeWrites?: boolean;
}

export const DEFAULT_ROTATION: RotationPolicy = { maxBytes: 10 * 1024 * 1024, keep: 3 };

export class RotatingLog {
  private fd: number | null = null;
  private size = 0;

  constructor(
    readonly file: string,
    private readonly policy: RotationPolicy = DEFAULT_ROTATION,
  ) {}

  write(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (buf.length === 0) return;
    let off = 0;
    while (off < buf.length) {
      const fd = this.open();
      const room = this.policy.maxBytes - this.size;
      const rest = buf.length - off;
      if (
        room <= 0 ||
        (this.policy.wholeWrites && rest > room && rest <= this.policy.maxBytes && this.size > 0)
      ) {
        this.rotate();
        continue;
      }
      const n = Math.min(room, buf.length - off);
      writeSync(fd, buf, off, n);
      this.size += n;
      off += n;
    }
  }

  /** A line marking a lifecycle moment (start, exit) in the output stream. */
  mark(text: string, at: number): void {
    this.write(`--- ${new Date(at).toISOString()} ${text}\n`);
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private open(): number {
    if (this.fd === null) {
      mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 });
      this.fd = openSync(this.file, 'a', 0o600);
      this.size = fstatSync(this.fd).size;
    }
    return this.fd;
  }

  private rotate(): void {
    this.close();
    const { keep } = this.policy;
    if (keep <= 0) {
      rmSync(this.file, { force: true });
    } else {
      rmSync(`${this.file}.${keep}`, { force: true });
      for (let i = keep - 1; i >= 1; i--) {
        if (existsSync(`${this.file}.${i}`)) renameSync(`${this.file}.${i}`, `${this.file}.${i + 1}`);
      }
      if (existsSync(this.file)) renameSync(this.file, `${this.file}.1`);
    }
    this.size = 0;
  }
}

/** The last `maxBytes` of a stream, for results and status ("output tail"). */
export class OutputTail {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly maxBytes = 4096) {}

  push(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.chunks.push(buf.length > this.maxBytes ? buf.subarray(buf.length - this.maxBytes) : buf);
    this.size += Math.min(buf.length, this.maxBytes);
    while (this.size > this.maxBytes && this.chunks.length > 1) {
      const first = this.chunks[0]!;
      const excess = this.size - this.maxBytes;
      if (first.length <= excess) {
        this.chunks.shift();
        this.size -= first.length;
      } else {
        this.chunks[0] = first.subarray(excess);
        this.size -= excess;
      }
    }
  }

  text(): string {
    // A cut through a multi-byte character shows as U+FFFD, which is fine for a tail.
    return Buffer.concat(this.chunks).toString('utf8');
  }
}
