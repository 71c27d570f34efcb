// Process-group checks for tests, with ps (independent of svcd's own /proc reading).
import { execFileSync } from 'node:child_process';

/** Live (non-zombie) processes of a process group, as ps reports them. */
export function psGroup(pgid: number): { pid: number; stat: string; args: string }[] {
  const out = execFileSync('ps', ['-e', '-o', 'pid=,pgid=,stat=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .map((l) => l.trim().match(/^(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/))
    .filter((m): m is RegExpMatchArray => m !== null)
    .map((m) => ({ pid: Number(m[1]), pgid: Number(m[2]), stat: m[3] ?? '', args: m[4] ?? '' }))
    .filter((p) => p.pgid === pgid && !p.stat.startsWith('Z'))
    .map(({ pid, stat, args }) => ({ pid, stat, args }));
}

/** True when pid is a live (non-zombie) process. */
export function isAlive(pid: number): boolean {
  try {
    const stat = execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' }).trim();
    return stat !== '' && !stat.startsWith('Z');
  } catch {
    return false; // ps exits 1 when there is no such process
  }
}
