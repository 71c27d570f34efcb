// The reference agents shipped with svcd (docs/agents.md, Reference agents): `svcd reference-agent
// {prompt}` (one-shot CLI), `--interactive` (a line-by-line REPL for tmux panes and PTYs)
// and `--acp` (an ACP agent over stdio, reference-agent-acp.ts). All follow reference-verbs.ts; none uses the
// network, so tests and a fresh `svc up` can drive every path of a runtime.
import { createInterface } from 'node:readline';
import { perform, type Step } from './reference-verbs.js';

export interface ReferenceIO {
  env: NodeJS.ProcessEnv;
  cwd: string;
  stdin: NodeJS.ReadableStream;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** One-shot: performs the prompt, answer on stdout, progress on stderr; returns the exit code. */
export async function runOneShot(prompt: string, io: ReferenceIO): Promise<number> {
  for await (const step of perform(prompt, { cwd: io.cwd, env: io.env })) {
    const code = renderText(step, io.stdout, io.stderr);
    if (code !== null) return code;
  }
  return 0;
}

/** Interactive: one prompt per input line, until EOF (exit 0) or an exit: instruction. */
export async function runInteractive(io: ReferenceIO): Promise<number> {
  io.stdout.write('reference agent ready\n> ');
  const rl = createInterface({ input: io.stdin, terminal: false });
  for await (const line of rl) {
    for await (const step of perform(line, { cwd: io.cwd, env: io.env })) {
      if (step.kind === 'exit') {
        rl.close();
        return step.code;
      }
      renderText(step, io.stdout, io.stdout);
    }
    io.stdout.write('> ');
  }
  return 0;
}

/** Renders a step as text; returns an exit code when the run ends here. */
function renderText(step: Step, out: NodeJS.WritableStream, progress: NodeJS.WritableStream): number | null {
  switch (step.kind) {
    case 'progress':
      progress.write(`progress: ${step.text}\n`);
      return null;
    case 'tool_start':
      progress.write(`progress: ${step.title}\n`);
      return null;
    case 'tool_end':
      return null;
    case 'answer':
      out.write(step.text.endsWith('\n') ? step.text : `${step.text}\n`);
      return null;
    case 'fail':
      progress.write(`failed: ${step.reason}\n`);
      return 1;
    case 'exit':
      return step.code;
  }
}
