// Reading a size-rotated log (<file>, <file>.1 … <file>.N, as RotatingLog writes them): the
// last lines across the rotated files, then, with follow, the lines appended after them as
// `tail -F` does — across a rotation (the file renamed and a new one started: the old one is
// read to its end first, then the new one from its start) and a truncation. Polls the file;
// stops when the signal aborts.
import { type FileHandle, open, readdir, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { Clock } from '../../lib/clock.js';
import { LineSplitter } from './lines.js';
import { TailWindow } from './window.js';

const CHUNK = 64 * 1024;

/** The rotated files of `file`, oldest first (<file>.N … <file>.1), then `file` itself. */
export async function rotatedFiles(file: string): Promise<string[]> {
  const base = basename(file);
  const names = await readdir(dirname(file)).catch(() => [] as string[]);
  const numbered = names
    .map((n) => (n.startsWith(`${base}.`) ? Number(n.slice(base.length + 1)) : Number.NaN))
    .filter((k) => Number.isInteger(k) && k > 0)
    .sort((a, b) => b - a);
  return [...numbered.map((k) => `${file}.${k}`), file];
}

/**
 * The rotated files newer than the one whose inode is `ino`, oldest first. When that one is
 * gone (rotated past the kept count), every rotated file left is newer than it.
 */
async function rotatedAfter(file: string, ino: number): Promise<string[]> {
  const rotated = (await rotatedFiles(file)).slice(0, -1);
  for (let i = rotated.length - 1; i >= 0; i--) {
    const st = await stat(rotated[i] as string).catch(() => null);
    if (st?.ino === ino) return rotated.slice(i + 1);
  }
  return rotated;
}

/** Reads `handle` from `offset` to its end, line by line; returns the offset reached. */
async function drain(
  handle: FileHandle,
  offset: number,
  splitter: LineSplitter,
  emit: (line: string) => void,
): Promise<number> {
  const buf = Buffer.allocUnsafe(CHUNK);
  for (;;) {
    const { bytesRead } = await handle.read(buf, 0, CHUNK, offset);
    if (bytesRead === 0) return offset;
    offset += bytesRead;
    for (const line of splitter.push(buf.subarray(0, bytesRead))) emit(line);
  }
}

export interface TailOptions {
  /** Lines to print before following (Infinity: all). */
  lines: number;
  /** Epoch ms: skip lines older than this. */
  since: number | null;
}

export interface FollowOptions {
  clock: Clock;
  /** How often to look for new lines and rotations. */
  pollMs: number;
  signal: AbortSignal;
  /** Said once when the file is truncated in place (reading restarts at its start). */
  notice(text: string): void;
}

export interface OpenedLog {
  /** The lines to print first: the last ones (opts.lines) not older than opts.since. */
  lines: string[];
  /** Emits what is appended from here on, across rotations, until the signal aborts. */
  follow(emit: (line: string) => void, opts: FollowOptions): Promise<void>;
  close(): Promise<void>;
}

/**
 * Reads the last lines of `file` and its rotated files and keeps the file open to follow it.
 * A missing file has no lines yet; following waits for it, as `tail -F` does.
 */
export async function openLog(file: string, opts: TailOptions & { follow?: boolean }): Promise<OpenedLog> {
  // Opened first: the lines printed and the lines followed come from the same file even if it
  // rotates meanwhile.
  let handle = await open(file, 'r').catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return null;
    throw e;
  });
  const window = new TailWindow(opts.lines, opts.since);
  // One splitter over all the files: RotatingLog fills each file to its size limit, so a line
  // can begin in <file>.1 and end in <file>.
  const splitter = new LineSplitter();
  for (const f of (await rotatedFiles(file)).slice(0, -1)) {
    const h = await open(f, 'r').catch(() => null);
    if (!h) continue; // rotated away meanwhile
    try {
      await drain(h, 0, splitter, (l) => window.line(l));
      window.endOfFile((await h.stat()).mtimeMs);
    } finally {
      await h.close();
    }
  }
  let offset = 0;
  let ino = 0;
  if (handle) {
    offset = await drain(handle, 0, splitter, (l) => window.line(l));
    // An unfinished last line is shown now, or when following once its newline arrives.
    if (!opts.follow) {
      const last = splitter.flush();
      if (last !== null) window.line(last);
    }
    const st = await handle.stat();
    ino = st.ino;
    window.endOfFile(st.mtimeMs);
  }
  const lines = window.lines();
  const close = async () => {
    await handle?.close();
    handle = null;
  };
  return {
    lines,
    close,
    async follow(emit, f) {
      try {
        while (!f.signal.aborted) {
          if (handle) offset = await drain(handle, offset, splitter, emit);
          const st = await stat(file).catch(() => null);
          if (st && (!handle || st.ino !== ino)) {
            // Rotated (or created): the writer closed the old file before renaming it, so
            // what is left of it is read first, then the files rotated after it (several
            // rotations between two looks), then the new file from its start.
            if (handle) {
              await drain(handle, offset, splitter, emit);
              await handle.close();
              for (const f of await rotatedAfter(file, ino)) {
                const h = await open(f, 'r').catch(() => null);
                if (!h) continue;
                await drain(h, 0, splitter, emit).finally(() => h.close());
              }
            }
            handle = await open(file, 'r').catch(() => null);
            ino = handle ? (await handle.stat()).ino : 0;
            offset = 0;
            continue;
          }
          if (st && handle && st.size < offset) {
            f.notice(`${file} was truncated; reading it from its start`);
            splitter.flush();
            offset = 0;
            continue;
          }
          await f.clock.sleep(f.pollMs, f.signal).catch(() => {});
        }
      } finally {
        await close();
      }
    },
  };
}
