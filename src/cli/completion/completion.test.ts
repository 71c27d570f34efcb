import { spawnSync } from 'node:child_process';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import type { CliIO } from '../io.js';
import { buildSvc } from '../program.js';
import { bashScript, fishScript, zshScript } from './scripts.js';
import { allCommands, commandSpec } from './spec.js';

const io: CliIO = {
  env: {},
  paths: { home: '/nonexistent', towerDir: '/x', svcdDir: '/x', credentialsFile: '/x' },
  out: () => {},
  err: () => {},
  readStdin: async () => '',
};
const program = buildSvc(io);
const spec = commandSpec(program);

/** Runs `script` in a real shell with the completion script loaded; returns stdout lines. */
function inShell(shell: 'bash' | 'zsh', completion: string, script: string): string[] {
  const r = spawnSync(shell, ['-c', `${script}`], {
    input: '',
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent', COMPLETION: completion },
  });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return r.stdout.split('\n').filter((l) => l !== '');
}

const hasZsh = spawnSync('zsh', ['--version']).status === 0;

/** Every command under `cmd` with its path, as commander holds them. */
function commanderTree(cmd: Command, path: string[] = ['svc']): { path: string[]; cmd: Command }[] {
  return [{ path, cmd }, ...cmd.commands.flatMap((c) => commanderTree(c, [...path, c.name()]))];
}

describe('completion spec', () => {
  it('holds every command of the program with its options, the root options inherited', () => {
    const byPath = new Map(allCommands(spec).map((c) => [c.path.join(' '), c]));
    for (const { path, cmd } of commanderTree(program)) {
      const c = byPath.get(path.join(' '));
      expect(c, path.join(' ')).toBeDefined();
      const names = c?.options.flatMap((o) => o.names) ?? [];
      for (const o of cmd.options) expect(names, `${path.join(' ')} ${o.flags}`).toContain(o.long ?? o.short);
      for (const global of ['--url', '--token', '--json', '--help']) expect(names).toContain(global);
    }
  });
});

describe('bash completion', () => {
  const script = bashScript(spec, '0.0.0');
  const complete = (...words: string[]) =>
    `COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _svc; echo "\${COMPREPLY[*]}"`;

  it('registers with complete and completes commands, subcommands, options and choices', () => {
    const lines = inShell(
      'bash',
      script,
      [
        'source /dev/stdin <<<"$COMPLETION"',
        'complete -p svc',
        complete('svc', 'ag'),
        complete('svc', 'agent', 'cron', ''),
        complete('svc', '--url', 'http://t:8008', 'agent', 'cr'),
        complete('svc', '--url', '=', 'http://t:8008', 'daemon', 'u'),
        complete('svc', 'domain', 'list', '--c'),
        complete('svc', 'completion', ''),
        complete('svc', 'agent', 'cron', 'list', '--j'),
        complete('svc', 'logs', '-f', ''),
        `COMP_WORDS=(svc logs --since ''); COMP_CWORD=3; _svc; echo "count=\${#COMPREPLY[@]}"`,
      ].join('\n'),
    );
    expect(lines).toEqual([
      'complete -o default -F _svc svc',
      'agent',
      'list describe history reload gc-now help',
      'cron',
      'up',
      '--cursor',
      'bash zsh fish',
      '--json',
      'tower svcd',
      // a free-form value: nothing from svc (bash then offers file names)
      'count=0',
    ]);
  });

  it('offers every subcommand and every option of every command', () => {
    const all = allCommands(spec);
    const lines = inShell(
      'bash',
      script,
      [
        'source /dev/stdin <<<"$COMPLETION"',
        ...all.map(
          (c) => `echo "$(__svc_words '${c.path.join(' ')}')|$(__svc_options '${c.path.join(' ')}')"`,
        ),
      ].join('\n'),
    );
    expect(lines).toHaveLength(all.length);
    for (const [i, c] of all.entries()) {
      const [words, options] = (lines[i] ?? '').split('|');
      for (const sub of c.commands) expect(words?.split(' '), c.path.join(' ')).toContain(sub.name);
      for (const o of c.options.flatMap((x) => x.names))
        expect(options?.split(' '), c.path.join(' ')).toContain(o);
    }
  });
});

describe.skipIf(!hasZsh)('zsh completion', () => {
  it('loads under compinit, registers _svc and completes through zsh', () => {
    // Completion builtins only work inside a completion widget; these stand-ins print what
    // _svc hands them, so the walk and the data run in a real zsh.
    const stubs = [
      `_describe() { print -r -- "\${(j: :)\${(@)\${(P)4}%%:*}}" }`,
      `compadd() { print -r -- "\${(j: :)\${(P)2}}" }`,
      '_files() { print -r -- "<files>" }',
      `compset() { PREFIX=\${PREFIX#*=} }`,
    ].join('\n');
    const complete = (prefix: string, ...words: string[]) =>
      `words=(${words.map((w) => `'${w}'`).join(' ')}); CURRENT=${words.length}; PREFIX='${prefix}'; _svc`;
    const lines = inShell(
      'zsh',
      zshScript(spec, '0.0.0'),
      [
        'autoload -U compinit && compinit -u -D',
        'source =(print -r -- "$COMPLETION")',
        'print -r -- "$_comps[svc]"',
        stubs,
        complete('ag', 'svc', 'ag'),
        complete('', 'svc', '--token', 'x', 'agent', 'cron', ''),
        complete('--j', 'svc', 'domain', 'list', '--j'),
        complete('', 'svc', 'completion', ''),
        complete('', 'svc', 'tower', 'serve', '--log-level', ''),
      ].join('\n'),
    );
    expect(lines[0]).toBe('_svc');
    // _describe receives every candidate of the command (zsh filters by the prefix itself).
    expect(lines[1]?.split(' ')).toContain('agent');
    expect(lines[2]).toBe('list describe history reload gc-now help');
    expect(lines[3]?.split(' ')).toEqual(expect.arrayContaining(['--limit', '--cursor', '--json', '--url']));
    expect(lines[4]).toBe('bash zsh fish');
    expect(lines[5]).toBe('<files>');
  });
});

describe('fish completion', () => {
  it('has a complete line for each subcommand and option, conditioned on the command path', () => {
    const script = fishScript(spec, '0.0.0');
    expect(script).toContain(
      `complete -c svc -n '__svc_at \\'svc agent\\'' -a 'cron' -d 'this node\\'s cron jobs`,
    );
    expect(script).toContain(`complete -c svc -n '__svc_at \\'svc completion\\'' -a 'bash zsh fish'`);
    expect(script).toMatch(/complete -c svc -n '__svc_at \\'svc\\'' -l url -r -d 'tower base URL/);
    expect(script).toMatch(/complete -c svc -n '__svc_at \\'svc domain list\\'' -l json -d /);
  });
});
