// Logs of what systemd runs (svcd's and the tower's user units, agents on the systemd
// backend) are in the journal: `svc logs` reads them through journalctl, message text only
// (`-o cat`: svc's lines carry their own time), and stops it when the signal aborts.
import { spawn } from 'node:child_process';
import { SvcError } from '../../protocol/errors.js';
import { LineSplitter } from './lines.js';

export interface JournalQuery {
  /** The user unit, e.g. svcd.service. */
  unit: string;
  /** Last lines to print (Infinity: all). */
  lines: number;
  /** Epoch ms, or null. */
  since: number | null;
  follow: boolean;
}

export function journalctlArgs(q: JournalQuery): string[] {
  return [
    '--user',
    '--unit',
    q.unit,
    '--output',
    'cat',
    '--no-pager',
    '--lines',
    Number.isFinite(q.lines) ? String(q.lines) : 'all',
    ...(q.since !== null ? ['--since', `@${Math.floor(q.since / 1000)}`] : []),
    ...(q.follow ? ['--follow'] : []),
  ];
}

/** Runs journalctl for `q`, line by line, until it ends or the signal aborts. */
export async function readJournal(
  q: JournalQuery,
  env: NodeJS.ProcessEnv,
  emit: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  const child = spawn('journalctl', journalctlArgs(q), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const stop = () => child.kill('SIGTERM');
  signal.addEventListener('abort', stop, { once: true });
  const split = new LineSplitter();
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    for (const l of split.push(d)) emit(l);
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString('utf8');
  });
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (c) => resolve(c));
    });
    const last = split.flush();
    if (last !== null) emit(last);
    if (code !== 0 && !signal.aborted) {
      throw new SvcError(
        'unavailable',
        `journalctl ${journalctlArgs(q).join(' ')} failed (${code}): ${stderr.trim()}`,
      );
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new SvcError('unavailable', `${q.unit} logs to the journal, and journalctl is not installed`);
    }
    throw e;
  } finally {
    signal.removeEventListener('abort', stop);
  }
}
