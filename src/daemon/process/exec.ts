// Runs a short helper command (tmux, systemctl) without a shell and collects its output.
import { spawn } from 'node:child_process';

export interface ExecResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function exec(argv: readonly string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<ExecResult> {
  return new Promise((resolve) => {
    const [cmd, ...args] = argv;
    if (!cmd) {
      resolve({ code: null, stdout: '', stderr: 'empty command' });
      return;
    }
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'], ...(cwd ? { cwd } : {}) });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    child.once('error', (e) => resolve({ code: null, stdout, stderr: e.message }));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}
