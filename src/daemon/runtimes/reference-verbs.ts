// What the reference agents do with a prompt (deterministic, no network). Each non-empty
// line is one instruction:
//   run: <command>   run it with sh -c, report its output; a non-zero exit fails the turn
//   fail: <reason>   fail the turn with that reason
//   sleep: <N>       wait N seconds (fractions allowed), reporting each second
//   progress: <N>    emit N progress steps
//   exit: <N>        the agent process exits with code N (a crash, for supervision tests)
//   anything else    answered with "echo: <line>"
// The three front ends (one-shot CLI, interactive, ACP) render the steps differently.
import { spawn } from 'node:child_process';

export type Step =
  | { kind: 'progress'; text: string }
  | { kind: 'tool_start'; id: string; title: string }
  | { kind: 'tool_end'; id: string; output: string; exitCode: number }
  | { kind: 'answer'; text: string }
  | { kind: 'fail'; reason: string }
  | { kind: 'exit'; code: number };

export interface PerformOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal;
}

const MAX_OUTPUT = 64 * 1024;

export async function* perform(prompt: string, o: PerformOptions): AsyncGenerator<Step> {
  const lines = prompt
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '');
  let tools = 0;
  for (const line of lines) {
    if (o.signal?.aborted) return;
    const m = /^(run|fail|sleep|progress|exit):\s*(.*)$/s.exec(line);
    const verb = m?.[1];
    const arg = m?.[2] ?? '';
    if (verb === 'run') {
      const id = `tool-${++tools}`;
      yield { kind: 'tool_start', id, title: `run: ${arg}` };
      const r = await runShell(arg, o);
      yield { kind: 'tool_end', id, output: r.output, exitCode: r.exitCode };
      if (r.exitCode !== 0) {
        yield { kind: 'fail', reason: `command failed with exit code ${r.exitCode}: ${arg}` };
        return;
      }
      yield { kind: 'answer', text: r.output };
    } else if (verb === 'fail') {
      yield { kind: 'fail', reason: arg || 'asked to fail' };
      return;
    } else if (verb === 'sleep') {
      const seconds = Number(arg);
      if (!Number.isFinite(seconds) || seconds < 0) {
        yield { kind: 'fail', reason: `sleep needs a number of seconds, got "${arg}"` };
        return;
      }
      let left = seconds * 1000;
      while (left > 0) {
        const step = Math.min(1000, left);
        if (!(await delay(step, o.signal))) return;
        left -= step;
        yield {
          kind: 'progress',
          text: `slept ${((seconds * 1000 - left) / 1000).toFixed(1)} of ${seconds} s`,
        };
      }
      yield { kind: 'answer', text: `slept ${seconds} s` };
    } else if (verb === 'progress') {
      const n = Math.max(0, Math.floor(Number(arg) || 0));
      for (let i = 1; i <= n; i++) yield { kind: 'progress', text: `step ${i} of ${n}` };
      yield { kind: 'answer', text: `made ${n} progress steps` };
    } else if (verb === 'exit') {
      yield { kind: 'exit', code: Math.floor(Number(arg) || 0) };
      return;
    } else {
      yield { kind: 'progress', text: `working on: ${line.slice(0, 200)}` };
      yield { kind: 'answer', text: `echo: ${line}` };
    }
  }
}

function delay(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function runShell(command: string, o: PerformOptions): Promise<{ output: string; exitCode: number }> {
  return new Promise((resolve) => {
    // The reference agent is asked to run a shell command: a shell is the point here.
    const child = spawn('sh', ['-c', command], { cwd: o.cwd, env: o.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const add = (b: Buffer) => {
      if (output.length < MAX_OUTPUT) output += b.toString('utf8');
    };
    child.stdout.on('data', add);
    child.stderr.on('data', add);
    const onAbort = () => child.kill('SIGTERM');
    o.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (e) => resolve({ output: e.message, exitCode: 127 }));
    child.on('close', (code, sig) => {
      o.signal?.removeEventListener('abort', onAbort);
      resolve({ output: output.slice(0, MAX_OUTPUT), exitCode: code ?? (sig ? 128 : 1) });
    });
  });
}
