import { describe, expect, it } from 'vitest';
import { formatLogLine, formatTime, parsePinoLine } from './log-format.js';

const T = Date.UTC(2026, 4, 3, 17, 29, 38, 123);

describe('formatLogLine', () => {
  it('puts a readable time, the level, logger and message first, other fields as key=value', () => {
    const line = JSON.stringify({
      level: 40,
      time: T,
      name: 'svcd',
      component: 'supervisor',
      msg: 'agent restarted',
      agent_id: 'ag_1',
      restarts: 2,
      why: 'exit code 1',
    });
    expect(formatLogLine(line, { utc: true })).toBe(
      '2026-05-03 17:29:38.123Z WARN  svcd supervisor: agent restarted agent_id=ag_1 restarts=2 why="exit code 1"',
    );
  });

  it('shows an error message inline and its stack indented below', () => {
    const line = JSON.stringify({
      level: 50,
      time: T,
      name: 'tower',
      msg: 'request failed',
      err: { type: 'Error', message: 'no disk', stack: 'Error: no disk\n    at f (a.js:1:2)' },
    });
    expect(formatLogLine(`${line}\n`, { utc: true })).toBe(
      '2026-05-03 17:29:38.123Z ERROR tower: request failed err="no disk"\n    Error: no disk\n        at f (a.js:1:2)',
    );
  });

  it('renders objects as JSON and names unknown levels', () => {
    const line = JSON.stringify({ level: 35, time: T, msg: 'x', tower: { connected: true } });
    expect(formatLogLine(line, { utc: true })).toBe(
      '2026-05-03 17:29:38.123Z L35   x tower={"connected":true}',
    );
  });

  it('leaves lines that are not pino records as they are', () => {
    for (const line of [
      'plain output',
      '{"not":"pino"}',
      '{broken',
      '[1,2]',
      '--- 2026-05-03T17:29:38.123Z started',
    ]) {
      expect(formatLogLine(line)).toBe(line);
      expect(parsePinoLine(line)).toBeNull();
    }
  });

  it('writes local time without a zone letter', () => {
    const local = new Date(2026, 0, 2, 3, 4, 5, 6).getTime();
    expect(formatTime(local)).toBe('2026-01-02 03:04:05.006');
  });
});
