import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../protocol/errors.js';
import { parseTomlText } from '../config/toml.js';
import { loadAgentsFile, parseAgentsDoc } from './agents-file.js';

const FILE = '/srv/.svc/svcd/agents.toml';
const parse = (text: string) => parseAgentsDoc(parseTomlText(FILE, text));

function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (isSvcError(e) && e.code === 'config_invalid') return e.message;
    throw e;
  }
  throw new Error('expected config_invalid');
}

describe('agents.toml', () => {
  it('reads every field with its defaults', () => {
    const specs = parse(`
[[agent]]
id = "reviewer"
runtime = "alpha_agent_acp"

[[agent]]
id = "builder"
runtime = "alpha_code"
command = ["claude", "-p", "{prompt}"]
cwd = "/srv/repo"
env = { MODE = "ci" }
supervise = true
nightly_restart = "03:30"
pty = true
backend = "process"
profile = "build"
prompt = "check the build"

[[agent]]
id = "pane"
runtime = "mux_hosted"
session = "main"
nightly_restart = "off"
`);
    expect(specs).toEqual([
      {
        id: 'reviewer',
        runtime: 'alpha_agent_acp',
        command: null,
        cwd: null,
        env: {},
        supervise: true,
        nightlyRestart: undefined,
        pty: false,
        backend: null,
        profile: null,
        session: null,
        prompt: '',
      },
      {
        id: 'builder',
        runtime: 'alpha_code',
        command: ['claude', '-p', '{prompt}'],
        cwd: '/srv/repo',
        env: { MODE: 'ci' },
        supervise: true,
        nightlyRestart: { hour: 3, minute: 30 },
        pty: true,
        backend: 'process',
        profile: 'build',
        session: null,
        prompt: 'check the build',
      },
      {
        id: 'pane',
        runtime: 'mux_hosted',
        command: null,
        cwd: null,
        env: {},
        supervise: true,
        nightlyRestart: null,
        pty: false,
        backend: null,
        profile: null,
        session: 'main',
        prompt: '',
      },
    ]);
  });

  it('does not supervise one-shot CLI kinds unless asked', () => {
    expect(parse('[[agent]]\nid = "a"\nruntime = "beta_cli"\n')[0]?.supervise).toBe(false);
  });

  it('names file, line and column of a syntax error', () => {
    expect(messageOf(() => parse('[[agent]]\nid = "a"\nruntime = alpha_code\n'))).toMatch(
      /^\/srv\/\.svc\/svcd\/agents\.toml:3:\d+: syntax error: /,
    );
  });

  it('names the line of an unknown runtime', () => {
    expect(
      messageOf(() =>
        parse('[[agent]]\nid = "a"\nruntime = "alpha_code"\n\n[[agent]]\nid = "b"\nruntime = "delta"\n'),
      ),
    ).toBe(
      `${FILE}:7: agent[1].runtime: unknown runtime "delta" (known: alpha_code, alpha_agent_acp, beta_cli, gamma_cli, mux_hosted)`,
    );
  });

  it('names both lines of a duplicate id', () => {
    expect(
      messageOf(() =>
        parse('[[agent]]\nid = "a"\nruntime = "alpha_code"\n\n[[agent]]\nid = "a"\nruntime = "beta_cli"\n'),
      ),
    ).toBe(`${FILE}:6: agent[1].id: duplicate id "a" (first defined on line 2)`);
  });

  it('rejects unknown fields and missing required ones', () => {
    expect(messageOf(() => parse('[[agent]]\nid = "a"\nruntime = "alpha_code"\nsupervised = true\n'))).toBe(
      `${FILE}:4: agent[0].supervised: unknown field (allowed: id, runtime, command, cwd, env, supervise, nightly_restart, pty, backend, profile, session, prompt)`,
    );
    expect(messageOf(() => parse('[[agent]]\nid = "a"\n'))).toBe(`${FILE}:1: agent[0].runtime: is required`);
    expect(messageOf(() => parse('[agent]\nid = "a"\n'))).toBe(
      `${FILE}:1: agent: must be an array of tables ([[agent]]), got a table`,
    );
  });

  it('rejects combinations that cannot work', () => {
    const one =
      (extra: string, runtime = 'alpha_code') =>
      () =>
        parse(`[[agent]]\nid = "a"\nruntime = "${runtime}"\n${extra}\n`);
    expect(messageOf(one('pty = true', 'alpha_agent_acp'))).toBe(
      `${FILE}:4: agent[0].pty: an ACP agent uses its stdio for ACP and cannot run in a pseudo-terminal`,
    );
    expect(messageOf(one('backend = "systemd"', 'alpha_agent_acp'))).toBe(
      `${FILE}:4: agent[0].backend: an ACP agent talks to svcd over its stdio: use backend = "process"`,
    );
    expect(messageOf(one('backend = "process"', 'mux_hosted'))).toBe(
      `${FILE}:4: agent[0].backend: a mux_hosted agent runs in tmux: use backend = "tmux" or leave it out`,
    );
    expect(messageOf(one('backend = "tmux"'))).toBe(
      `${FILE}:4: agent[0].backend: the tmux backend is for runtime "mux_hosted"`,
    );
    expect(messageOf(one('session = "s"'))).toBe(
      `${FILE}:4: agent[0].session: only mux_hosted agents have a tmux session`,
    );
    expect(messageOf(one('cwd = "relative/dir"'))).toBe(
      `${FILE}:4: agent[0].cwd: must be an absolute path, got "relative/dir"`,
    );
    expect(messageOf(one('id2 = 1'))).toMatch(/:4: agent\[0\]\.id2: unknown field/);
    expect(messageOf(() => parse('[[agent]]\nid = "bad id"\nruntime = "alpha_code"\n'))).toMatch(
      /:2: agent\[0\]\.id: "bad id" is not a valid id/,
    );
  });

  it("rejects a profile that is another agent's id", () => {
    expect(
      messageOf(() =>
        parse(
          '[[agent]]\nid = "a"\nruntime = "alpha_code"\n[[agent]]\nid = "b"\nruntime = "alpha_code"\nprofile = "a"\n',
        ),
      ),
    ).toBe(`${FILE}:7: agent[1].profile: "a" is already the id, profile or session of agent "a"`);
  });

  it('treats a missing file as no agents', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agents-'));
    try {
      expect(await loadAgentsFile(join(dir, 'agents.toml'))).toEqual([]);
      writeFileSync(join(dir, 'agents.toml'), '[[agent]]\nid = "x"\nruntime = "gamma_cli"\n');
      expect((await loadAgentsFile(join(dir, 'agents.toml'))).map((s) => s.id)).toEqual(['x']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
