// TerminalSession against a fake AgentTerminal: the cases a real PTY makes hard to time.
import { describe, expect, it } from 'vitest';
import type { ExitInfo } from '../process/group.js';
import type { AgentTerminal } from '../process/terminal.js';
import { TerminalSession, type ViewerPort } from './session.js';

/** A terminal whose agent has already exited, as PtyTerminal behaves: onExit calls back at once. */
function exitedTerminal(exit: ExitInfo): AgentTerminal {
  return {
    agentId: 'tty',
    pid: 4242,
    cols: 80,
    rows: 24,
    onData: () => () => {},
    onExit: (listener) => {
      listener(exit);
      return () => {};
    },
    write: () => {},
    resize: () => {},
    pause: () => {},
    resume: () => {},
  };
}

describe('TerminalSession', () => {
  it('is made ended, without throwing, for a terminal whose agent has already exited', () => {
    // The gateway makes a session when the supervisor reports the terminal, which it does
    // after recording the start: an agent that failed at once has exited by then.
    const s = new TerminalSession(exitedTerminal({ code: 1, signal: null }));
    expect(s.isEnded).toBe(true);

    const sent: (Buffer | string)[] = [];
    const closes: [number, string][] = [];
    const port: ViewerPort = {
      send: (data, cb) => {
        sent.push(data);
        cb();
      },
      close: (code, reason) => closes.push([code, reason]),
    };
    const v = s.attach(port, {
      id: 'local-1',
      via: 'local',
      who: 'local',
      readOnly: false,
      cols: 90,
      rows: 20,
      since: 0,
    });
    expect(v.closed).toBe(true);
    expect(closes).toEqual([[1000, 'agent exited']]);
    expect(sent).toEqual([]);
    expect(s.list()).toEqual([]);
  });
});
