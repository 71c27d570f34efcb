import { describe, expect, it } from 'vitest';
import { SvcError } from '../protocol/errors.js';
import type { CliIO } from './io.js';
import { buildSvc } from './program.js';
import { errorReport, runProgram, UsageError, wantsJson } from './run.js';

function fakeIO(): CliIO & { errs: string[]; outs: string[] } {
  const errs: string[] = [];
  const outs: string[] = [];
  return {
    errs,
    outs,
    env: {},
    paths: {
      home: '/nonexistent',
      towerDir: '/nonexistent/tower',
      svcdDir: '/nonexistent/svcd',
      credentialsFile: '/x',
    },
    out: (t) => outs.push(t),
    err: (t) => errs.push(t),
    readStdin: async () => '',
  };
}

/** Runs svc in-process as the entry point does: --json decided from argv. */
async function svc(args: string[]) {
  const io = fakeIO();
  const json = wantsJson(args);
  const code = await runProgram('svc', () => buildSvc(io, { json }).parseAsync(args, { from: 'user' }), io, {
    json,
  });
  return { code, errs: io.errs, outs: io.outs };
}

describe('wantsJson', () => {
  it('sees --json anywhere before --, and nowhere after it', () => {
    expect(wantsJson(['--json', 'domain', 'list'])).toBe(true);
    expect(wantsJson(['domain', 'list', '--json'])).toBe(true);
    expect(wantsJson(['attach', 'x', '--', '--json'])).toBe(false);
    expect(wantsJson(['domain', 'list'])).toBe(false);
  });
});

describe('errors with --json', () => {
  it('prints a usage error as one JSON object and nothing else, exit 2', async () => {
    const r = await svc(['--json', 'domain', 'list', '--no-such-flag']);
    expect(r.code).toBe(2);
    expect(r.errs).toEqual([
      JSON.stringify({ error: { code: 'usage', message: "unknown option '--no-such-flag'", exit_code: 2 } }),
    ]);
    expect(r.outs).toEqual([]);
  });

  it('names a missing subcommand as a usage error', async () => {
    const r = await svc(['agent', '--json']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.errs.join('\n'))).toEqual({
      error: {
        code: 'usage',
        message: 'a subcommand is required (run with --help for the list)',
        exit_code: 2,
      },
    });
  });

  it('keeps the text message without --json', async () => {
    const io = fakeIO();
    const code = await runProgram('svc', async () => Promise.reject(new UsageError('bad flags')), io);
    expect(code).toBe(2);
    expect(io.errs).toEqual(['svc: error: bad flags']);
  });

  it('reports an SvcError with its code, HTTP status, field errors and sysexits code', () => {
    const e = new SvcError('validation_failed', 'body/title: must be string', {
      errors: [{ field: 'body/title', message: 'must be string' }],
    });
    expect(errorReport(e)).toEqual({
      error: {
        code: 'validation_failed',
        message: 'body/title: must be string',
        exit_code: 1,
        status: 400,
        errors: [{ field: 'body/title', message: 'must be string' }],
      },
    });
    expect(errorReport(new SvcError('tower_unreachable', 'cannot reach')).error).toEqual({
      code: 'tower_unreachable',
      message: 'cannot reach',
      exit_code: 69,
      status: 503,
    });
  });

  it('reports a bug as internal, exit 70, with its stack inside the object', async () => {
    const io = fakeIO();
    const code = await runProgram('svc', async () => Promise.reject(new TypeError('x is undefined')), io, {
      json: true,
    });
    expect(code).toBe(70);
    expect(io.errs).toHaveLength(1);
    const report = JSON.parse(io.errs[0] as string) as {
      error: { code: string; message: string; stack: string };
    };
    expect(report.error.code).toBe('internal');
    expect(report.error.message).toBe('x is undefined');
    expect(report.error.stack).toContain('TypeError: x is undefined');
  });

  it('prints nothing on stderr for --help and --version, exit 0', async () => {
    for (const args of [
      ['--json', '--version'],
      ['--json', '--help'],
    ]) {
      const r = await svc(args);
      expect(r.code).toBe(0);
      expect(r.errs).toEqual([]);
    }
  });
});
