// Files that hold credentials or state (the tower's database and keys, svcd's state.db and node
// identity): directories are made 0700 and files 0600 whatever the umask or a directory's
// earlier mode, and a process refuses to use such a file that other users can read, saying how
// to fix it. Synchronous: called once at start, before any database is opened.
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { SvcError } from '../protocol/errors.js';

/** Makes `dir` (and missing parents) and sets it to 0700 even if it existed with another mode. */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * Creates `file` empty with mode 0600 if it does not exist (a database opened next then
 * starts private, and SQLite gives its -wal and -shm files the database file's mode).
 */
export function ensurePrivateFile(file: string): void {
  closeSync(openSync(file, 'a', 0o600));
}

/**
 * Throws config_invalid when any existing file of `files` is readable or writable by group
 * or others, naming the command that fixes it. Missing files are fine.
 */
export function refuseSharedFiles(files: readonly string[], what: string): void {
  const shared: { file: string; mode: number }[] = [];
  for (const file of files) {
    let mode: number;
    try {
      mode = statSync(file).mode;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw new SvcError('config_invalid', `cannot check ${file}: ${(e as Error).message}`);
    }
    if ((mode & 0o077) !== 0) shared.push({ file, mode: mode & 0o777 });
  }
  if (shared.length === 0) return;
  const list = shared.map((s) => `${s.file} (mode ${s.mode.toString(8)})`).join(', ');
  throw new SvcError(
    'config_invalid',
    `${what} must be private to this user, but ${list} can be read by other users: run "chmod 600 ${shared.map((s) => s.file).join(' ')}" and start again`,
  );
}
