// A directory whose file system a test can fill and free again: a tmpfs of its own where this
// process may mount one (root, or CAP_SYS_ADMIN), else a plain directory and a file-size
// limit (RLIMIT_FSIZE, set on the process under test with prlimit) that refuses every write.
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { makeTempDir } from './tmp.js';

export interface SmallDisk {
  dir: string;
  /** How the disk is made full: a full tmpfs (ENOSPC) or a file-size limit (EFBIG). */
  how: 'tmpfs' | 'fsize';
  /** The process whose writes the file-size limit applies to (fsize only). */
  attach(pid: number): void;
  /** Writes fail from now on. */
  fill(): void;
  /** Writes succeed again. */
  free(): void;
  close(): void;
}

const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { stdio: 'pipe' });

/** A small disk, or why none can be made here (the caller skips with that reason). */
export function smallDisk(sizeMb: number): SmallDisk | { skip: string } {
  const tmp = makeTempDir('svc-small-disk-');
  try {
    run('mount', ['-t', 'tmpfs', '-o', `size=${sizeMb}m`, 'tmpfs', tmp.dir]);
  } catch (mountError) {
    try {
      run('prlimit', ['--version']);
    } catch {
      tmp.remove();
      return {
        skip: `cannot mount a tmpfs (${(mountError as Error).message.split('\n')[0]}) and prlimit is missing`,
      };
    }
    return fsizeDisk(tmp);
  }
  const filler = join(tmp.dir, 'filler');
  return {
    dir: tmp.dir,
    how: 'tmpfs',
    attach() {},
    fill() {
      const fd = openSync(filler, 'a');
      const block = Buffer.alloc(64 * 1024, 1);
      try {
        for (;;) writeSync(fd, block);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
      } finally {
        closeSync(fd);
      }
      // The last partial blocks: the file system is full to the byte.
      const fd2 = openSync(filler, 'a');
      try {
        for (;;) writeSync(fd2, Buffer.alloc(512, 1));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
      } finally {
        closeSync(fd2);
      }
    },
    free() {
      rmSync(filler, { force: true });
    },
    close() {
      try {
        run('umount', [tmp.dir]);
      } catch {
        // Something still has a file open there: detach now, released when it closes.
        run('umount', ['-l', tmp.dir]);
      }
      tmp.remove();
    },
  };
}

function fsizeDisk(tmp: { dir: string; remove(): void }): SmallDisk {
  let pid: number | null = null;
  const limit = (soft: string) => {
    if (pid === null) throw new Error('attach() the process under test first');
    // Soft limit only: the process may have it raised back (same user, up to the hard limit).
    run('prlimit', ['--pid', String(pid), `--fsize=${soft}:`]);
  };
  return {
    dir: tmp.dir,
    how: 'fsize',
    attach(p) {
      pid = p;
    },
    // Every write past the first byte of any file fails with EFBIG.
    fill: () => limit('1'),
    free: () => limit('unlimited'),
    close: () => tmp.remove(),
  };
}
