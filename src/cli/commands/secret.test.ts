import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { resolvePaths } from '../../lib/home.js';
import type { CommandDeps } from '../deps.js';
import { UsageError } from '../run.js';
import { registerSecret, valueFromStdin } from './secret.js';

describe('svc secret set input', () => {
  it('drops exactly one trailing newline unless asked to keep it', () => {
    expect(valueFromStdin('abc\n', false)).toBe('abc');
    expect(valueFromStdin('abc\r\n', false)).toBe('abc');
    expect(valueFromStdin('abc\n\n', false)).toBe('abc\n');
    expect(valueFromStdin('abc', false)).toBe('abc');
    expect(valueFromStdin('abc\n', true)).toBe('abc\n');
  });

  it('refuses to read a value typed on a terminal, before contacting the tower', async () => {
    let read = false;
    let contacted = false;
    const deps: CommandDeps = {
      io: {
        env: {},
        paths: resolvePaths({ SVC_HOME: '/nonexistent' }),
        out: () => {},
        err: () => {},
        readStdin: async () => {
          read = true;
          return 'typed';
        },
        stdinIsTTY: () => true,
      },
      client: async () => {
        contacted = true;
        throw new Error('unreachable');
      },
    };
    const program = new Command('svc').exitOverride();
    registerSecret(program, deps);
    const run = program.parseAsync(['node', 'svc', 'secret', 'set', 'TOKEN', '--domain', 'dom_1']);
    await expect(run).rejects.toBeInstanceOf(UsageError);
    await expect(run).rejects.toThrow('the value is read from stdin, which is a terminal');
    expect([read, contacted]).toEqual([false, false]);
  });
});
