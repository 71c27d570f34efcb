import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../protocol/errors.js';
import { defaultSvcdConfig, parseSvcdConfig } from './config.js';
import { parseTomlText } from './toml.js';

const FILE = '/home/op/.svc/svcd/config.toml';

function parse(text: string) {
  return parseSvcdConfig(parseTomlText(FILE, text));
}

function errorOf(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (e) {
    if (isSvcError(e)) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error('expected an error');
}

describe('config.toml', () => {
  it('uses the reference agents and the documented watchdog numbers when the file is empty', () => {
    const c = parse('');
    expect(c).toEqual(defaultSvcdConfig());
    expect(c.runtime.alpha_code.command).toEqual(['svcd', 'reference-agent', '{prompt}']);
    expect(c.runtime.alpha_agent_acp.command).toEqual(['svcd', 'reference-agent', '--acp']);
    expect(c.runtime.mux_hosted.command).toEqual(['svcd', 'reference-agent', '--interactive']);
    expect(c.watchdog).toEqual({
      pollMs: 60_000,
      graceMs: 90_000,
      throttleMs: 1_800_000,
      nightlyRestart: null,
      timezone: null,
    });
    expect(c.supervisor).toEqual({
      backend: 'auto',
      stopGraceMs: 10_000,
      tmuxSocket: null,
      logMaxBytes: 10 * 1024 * 1024,
      logKeep: 3,
    });
  });

  it('reads runtime templates, watchdog numbers and supervisor settings', () => {
    const c = parse(`
[runtime.alpha_code]
command = ["claude", "-p", "{prompt}"]
env = { CLAUDE_CONFIG = "/etc/claude" }

[watchdog]
poll = "1s"
grace = "5s"
throttle = "2m"
nightly_restart = "03:30"
timezone = "Europe/Berlin"

[supervisor]
backend = "process"
stop_grace = "3s"
tmux_socket = "svc-test"
log_max_bytes = 65536
log_keep = 2
`);
    expect(c.runtime.alpha_code).toEqual({
      command: ['claude', '-p', '{prompt}'],
      env: { CLAUDE_CONFIG: '/etc/claude' },
    });
    expect(c.runtime.beta_cli.command).toEqual(['svcd', 'reference-agent', '{prompt}']);
    expect(c.watchdog).toEqual({
      pollMs: 1000,
      graceMs: 5000,
      throttleMs: 120_000,
      nightlyRestart: { hour: 3, minute: 30 },
      timezone: 'Europe/Berlin',
    });
    expect(c.supervisor).toEqual({
      backend: 'process',
      stopGraceMs: 3000,
      tmuxSocket: 'svc-test',
      logMaxBytes: 65536,
      logKeep: 2,
    });
  });

  it('names file, line and column of a syntax error', () => {
    expect(errorOf(() => parse('[watchdog]\npoll = "1s\n'))).toEqual({
      code: 'config_invalid',
      message: expect.stringMatching(/^\/home\/op\/\.svc\/svcd\/config\.toml:2:\d+: syntax error: /),
    });
  });

  it('names the line of an unknown table', () => {
    // Areas append their tables to the list: check the start, not the whole list.
    expect(errorOf(() => parse('[watchdog]\npoll = "1s"\n\n[wrker]\nmax = 3\n')).message).toMatch(
      `${FILE}:4: wrker: unknown table (known: runtime, supervisor, watchdog, worker`,
    );
  });

  it('names the line and field of an unknown key', () => {
    expect(errorOf(() => parse('[watchdog]\npoll = "1s"\ngraze = "5s"\n')).message).toBe(
      `${FILE}:3: watchdog.graze: unknown field (allowed: poll, grace, throttle, nightly_restart, timezone)`,
    );
  });

  it('names an unknown runtime kind', () => {
    expect(errorOf(() => parse('[runtime.delta_cli]\ncommand = ["x"]\n')).message).toBe(
      `${FILE}:1: runtime.delta_cli: unknown field (allowed: alpha_code, alpha_agent_acp, beta_cli, gamma_cli, mux_hosted)`,
    );
  });

  it('rejects a misspelt placeholder in a template', () => {
    expect(
      errorOf(() => parse('[runtime.gamma_cli]\n\ncommand = ["gemini", "-p", "{promt}"]\n')).message,
    ).toBe(
      `${FILE}:3: runtime.gamma_cli.command: unknown placeholder {promt} (known: {prompt}, {task_id}, {workdir})`,
    );
  });

  it('rejects wrong types with the field and the value', () => {
    expect(errorOf(() => parse('[watchdog]\npoll = 60\n')).message).toBe(
      `${FILE}:2: watchdog.poll: must be a string, got number 60`,
    );
    expect(errorOf(() => parse('[watchdog]\npoll = "60"\n')).message).toMatch(
      /^.*:2: watchdog\.poll: invalid duration "60"/,
    );
    expect(errorOf(() => parse('[watchdog]\nnightly_restart = "25:00"\n')).message).toBe(
      `${FILE}:2: watchdog.nightly_restart: must be a local time "HH:MM" (24 h) or "off", got "25:00"`,
    );
    expect(errorOf(() => parse('[watchdog]\ntimezone = "Mars/Olympus"\n')).message).toBe(
      `${FILE}:2: watchdog.timezone: unknown time zone "Mars/Olympus" (use an IANA name such as Europe/Berlin)`,
    );
    expect(errorOf(() => parse('[runtime.alpha_code]\ncommand = ["a", 3]\n')).message).toBe(
      `${FILE}:2: runtime.alpha_code.command[1]: must be a string, got number 3`,
    );
  });
});

describe('TOML line locator', () => {
  it('locates keys in arrays of tables, sub-tables, dotted and quoted keys', () => {
    const doc = parseTomlText(
      'f.toml',
      [
        '# agents',
        '[[agent]]',
        'id = "a"',
        '',
        '[[agent]]',
        'id = "b"',
        'env.HOME = "/x"',
        '"quoted key" = 1',
        '[agent.extra]',
        'k = """',
        'id = "not a key"',
        '"""',
        'z = 2',
      ].join('\n'),
    );
    expect(doc.lineOf(['agent', 0, 'id'])).toBe(3);
    expect(doc.lineOf(['agent', 1, 'id'])).toBe(6);
    expect(doc.lineOf(['agent', 1, 'env', 'HOME'])).toBe(7);
    expect(doc.lineOf(['agent', 1, 'quoted key'])).toBe(8);
    expect(doc.lineOf(['agent', 1, 'extra'])).toBe(9);
    expect(doc.lineOf(['agent', 1, 'extra', 'z'])).toBe(13);
    expect(doc.lineOf(['agent', 1, 'missing'])).toBe(5);
  });
});
