import { describe, expect, it } from 'vitest';
import type { ToolKind } from '../../protocol/agent-policy.js';
import { parseTomlText } from '../config/toml.js';
import { parseSvcdConfig } from '../svcd-config.js';
import { decide, type EffectivePolicy, effectivePolicy, globMatch, toolCallFacts } from './policy.js';

const WD = '/home/n/.svc/work/mt_1';
const safe: EffectivePolicy = { mission: [], node: [], preset: 'safe' };
const call = (
  kind: ToolKind,
  over: Partial<{ title: string; command: string | null; paths: string[] }> = {},
) => ({
  kind,
  title: over.title ?? kind,
  command: over.command ?? null,
  paths: over.paths ?? [],
});

describe('the safe default policy', () => {
  it.each([
    ['read', [], 'allow'],
    ['search', [], 'allow'],
    ['think', [], 'allow'],
    ['edit', [`${WD}/src/a.ts`], 'allow'],
    ['edit', ['/etc/passwd'], 'ask'],
    ['edit', [`${WD}/a`, `${WD}/../other/b`], 'ask'],
    ['edit', [], 'ask'],
    ['execute', [`${WD}`], 'ask'],
    ['delete', [`${WD}/a`], 'ask'],
    ['move', [`${WD}/a`], 'ask'],
    ['fetch', [], 'ask'],
    ['switch_mode', [], 'ask'],
    ['other', [], 'ask'],
  ] as const)('decides %s on %j: %s', (kind, paths, action) => {
    expect(decide(safe, call(kind, { paths: [...paths] }), WD)).toEqual({ action, by: 'default (safe)' });
  });

  it('allows everything with the allow_all preset, and the rules still come first', () => {
    const p: EffectivePolicy = {
      mission: [],
      node: [{ kind: ['fetch'], action: 'deny' }],
      preset: 'allow_all',
    };
    expect(decide(p, call('execute', { command: 'rm -rf /' }), WD)).toEqual({
      action: 'allow',
      by: 'default (allow_all)',
    });
    expect(decide(p, call('fetch'), WD)).toEqual({ action: 'deny', by: 'node rule 1' });
  });
});

describe('rules', () => {
  it('takes the first matching rule, mission rules before node rules', () => {
    const p: EffectivePolicy = {
      mission: [{ kind: ['execute'], command: 'npm test*', action: 'allow' }],
      node: [
        { kind: ['execute'], command: 'rm *', action: 'deny' },
        { kind: ['execute'], command: 'npm *', action: 'deny' },
      ],
      preset: 'safe',
    };
    expect(decide(p, call('execute', { command: 'npm test -- --run' }), WD)).toEqual({
      action: 'allow',
      by: 'mission rule 1',
    });
    expect(decide(p, call('execute', { command: 'rm -rf /tmp/x' }), WD)).toEqual({
      action: 'deny',
      by: 'node rule 1',
    });
    expect(decide(p, call('execute', { command: 'npm publish' }), WD)).toEqual({
      action: 'deny',
      by: 'node rule 2',
    });
    expect(decide(p, call('execute', { command: 'make' }), WD)).toEqual({
      action: 'ask',
      by: 'default (safe)',
    });
  });

  it('needs every condition of a rule: a command glob never matches a call without a command', () => {
    const p: EffectivePolicy = { mission: [], node: [{ command: '*', action: 'allow' }], preset: 'safe' };
    expect(decide(p, call('fetch', { title: 'GET https://x' }), WD).action).toBe('ask');
    expect(decide(p, call('execute', { command: '' }), WD).action).toBe('allow');
  });

  it('matches path globs against absolute and working-directory-relative paths', () => {
    const p: EffectivePolicy = {
      mission: [],
      node: [
        { kind: ['delete'], path: 'build/**', action: 'allow' },
        { kind: ['edit'], path: '/etc/*', action: 'deny' },
      ],
      preset: 'safe',
    };
    expect(decide(p, call('delete', { paths: [`${WD}/build/a/b.o`] }), WD).action).toBe('allow');
    expect(decide(p, call('delete', { paths: [`${WD}/src/b.o`] }), WD).action).toBe('ask');
    expect(decide(p, call('edit', { paths: ['/etc/hosts'] }), WD).action).toBe('deny');
    // `*` in a path does not cross directories.
    expect(decide(p, call('edit', { paths: ['/etc/ssh/sshd_config'] }), WD).action).toBe('ask');
  });

  it('matches title globs', () => {
    const p: EffectivePolicy = {
      mission: [],
      node: [{ title: 'Fetch *docs*', action: 'allow' }],
      preset: 'safe',
    };
    expect(decide(p, call('fetch', { title: 'Fetch https://x/docs/a' }), WD).action).toBe('allow');
  });

  it('lets a mission replace the preset and put its rules first', () => {
    const e = effectivePolicy(
      { rules: [{ kind: ['execute'], action: 'deny' }], preset: 'safe' },
      { preset: 'allow_all', rules: [{ kind: ['fetch'], action: 'deny' }] },
    );
    expect(e).toEqual({
      mission: [{ kind: ['fetch'], action: 'deny' }],
      node: [{ kind: ['execute'], action: 'deny' }],
      preset: 'allow_all',
    });
    expect(effectivePolicy({ rules: [], preset: 'allow_all' }, { rules: [] }).preset).toBe('allow_all');
    expect(effectivePolicy({ rules: [], preset: 'safe' }, null)).toEqual({
      mission: [],
      node: [],
      preset: 'safe',
    });
  });
});

describe('globMatch', () => {
  it.each([
    ['npm test*', 'npm test --run', false, true],
    ['npm test*', 'npm install', false, false],
    ['*.ts', 'a/b.ts', false, true],
    ['*.ts', 'a/b.ts', true, false],
    ['**/*.ts', 'a/b.ts', true, true],
    ['a?c', 'abc', false, true],
    ['a.c', 'abc', false, false],
    ['(x)+[y]', '(x)+[y]', false, true],
  ])('%s ~ %s (path: %s) is %s', (glob, text, path, hit) => {
    expect(globMatch(glob, text, path)).toBe(hit);
  });
});

describe('toolCallFacts', () => {
  it('reads the kind, title, command and paths of an ACP tool call', () => {
    expect(
      toolCallFacts(
        {
          toolCallId: 't1',
          title: 'Run tests',
          kind: 'execute',
          rawInput: { command: ['npm', 'test'], cwd: '/tmp' },
          locations: [{ path: 'src/a.ts' }],
        },
        WD,
      ),
    ).toEqual({
      kind: 'execute',
      title: 'Run tests',
      command: 'npm test',
      paths: [`${WD}/src/a.ts`, '/tmp'],
    });
  });

  it('treats an unknown or missing kind as other and names the call by its id without a title', () => {
    expect(toolCallFacts({ toolCallId: 't2', kind: 'teleport', rawInput: 'x' }, WD)).toEqual({
      kind: 'other',
      title: 't2',
      command: null,
      paths: [],
    });
  });
});

describe('[agent_policy] in config.toml', () => {
  const parse = (text: string) => parseSvcdConfig(parseTomlText('/x/config.toml', text)).agent_policy;

  it('defaults to the safe preset, a 10 minute approval timeout and no rules', () => {
    expect(parse('')).toEqual({
      preset: 'safe',
      rules: [],
      approvalTimeoutMs: 600_000,
      approvalPollMs: 15_000,
    });
  });

  it('reads rules in order', () => {
    const c = parse(`[agent_policy]
preset = "allow_all"
approval_timeout = "30s"
[[agent_policy.rule]]
kind = ["execute"]
command = "npm test*"
action = "allow"
[[agent_policy.rule]]
path = "/etc/**"
outside_workdir = true
action = "deny"
`);
    expect(c).toEqual({
      preset: 'allow_all',
      approvalTimeoutMs: 30_000,
      approvalPollMs: 15_000,
      rules: [
        { kind: ['execute'], command: 'npm test*', action: 'allow' },
        { path: '/etc/**', outside_workdir: true, action: 'deny' },
      ],
    });
  });

  it.each([
    [
      '[[agent_policy.rule]]\nkind = ["exec"]\naction = "allow"\n',
      /agent_policy\.rule\[0\]\.kind.*unknown tool kind "exec"/,
    ],
    ['[[agent_policy.rule]]\nkind = ["read"]\n', /agent_policy\.rule\[0\]\.action.*is required/],
    ['[[agent_policy.rule]]\naction = "maybe"\n', /must be one of allow, deny, ask/],
    ['[agent_policy]\npreset = "yolo"\n', /preset.*must be one of safe, allow_all/],
  ])('refuses %j naming the field', (text, err) => {
    expect(() => parse(text)).toThrow(err);
  });
});
