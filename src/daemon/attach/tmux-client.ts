// The terminal of a mux_hosted agent for the attach gateway: a tmux client attached to the
// agent's session, in a PTY held by svcd. The pane itself stays tmux's (its output is already
// logged by pipe-pane, and tmux keeps its scrollback), so a new client simply redraws the
// current screen. Resizing the client resizes the window (tmux window-size "latest").
import { exec } from '../process/exec.js';
import { PtyTerminal } from '../process/terminal.js';
import { withoutCredentials } from '../runtimes/env.js';

export interface TmuxTarget {
  socket: string;
  session: string;
}

/** Without TMUX (a client started from inside tmux refuses to nest) and credentials. */
function tmuxEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...withoutCredentials(env), TERM: 'xterm-256color' };
}

/** A tmux client attached to the session, sized for the first viewer. */
export function tmuxClientTerminal(o: {
  agentId: string;
  target: TmuxTarget;
  env: NodeJS.ProcessEnv;
  cwd: string;
  cols: number;
  rows: number;
}): PtyTerminal {
  return PtyTerminal.spawn({
    agentId: o.agentId,
    argv: ['tmux', '-L', o.target.socket, 'attach-session', '-t', `=${o.target.session}`],
    cwd: o.cwd,
    env: tmuxEnv(o.env),
    log: null,
    cols: o.cols,
    rows: o.rows,
  });
}

/** The size of the session's window (for attach.list), or null when tmux does not answer. */
export async function tmuxWindowSize(
  target: TmuxTarget,
  env: NodeJS.ProcessEnv,
): Promise<{ cols: number; rows: number } | null> {
  const r = await exec(
    [
      'tmux',
      '-L',
      target.socket,
      'display-message',
      '-p',
      '-t',
      `=${target.session}:`,
      '#{window_width} #{window_height}',
    ],
    tmuxEnv(env),
  );
  const m = /^(\d+) (\d+)/.exec(r.stdout.trim());
  return r.code === 0 && m ? { cols: Number(m[1]), rows: Number(m[2]) } : null;
}
