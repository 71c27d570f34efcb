// `svc tower serve` options from the environment: SVC_TOWER_<OPTION> for each option, a flag
// winning over its variable, booleans spelled 1/0, and every variable documented.
import { readFileSync } from 'node:fs';
import { Command, type Option } from 'commander';
import { describe, expect, it } from 'vitest';
import { UsageError } from './run.js';
import { applyServeEnv, givenArgs, optionLabel, serveOptions, towerEnvName } from './tower-serve-config.js';

function parse(args: string[], env: NodeJS.ProcessEnv) {
  const cmd = serveOptions(new Command('serve').exitOverride());
  cmd.action(() => {});
  cmd.parse(args, { from: 'user' });
  applyServeEnv(cmd, env);
  return cmd;
}

describe('svc tower serve configuration', () => {
  it('names a variable after each option', () => {
    expect(towerEnvName('--listen')).toBe('SVC_TOWER_LISTEN');
    expect(towerEnvName('--data-dir')).toBe('SVC_TOWER_DATA_DIR');
    expect(towerEnvName('--oidc-jwks-cooldown')).toBe('SVC_TOWER_OIDC_JWKS_COOLDOWN');
  });

  it('takes options from the environment, a flag winning over its variable, defaults last', () => {
    const cmd = parse(['--rate-limit', '10/1s'], {
      SVC_TOWER_LISTEN: '0.0.0.0:9000',
      SVC_TOWER_DATA_DIR: '/var/lib/svc',
      SVC_TOWER_RATE_LIMIT: '99',
      SVC_TOWER_WS_COMPRESSION: '1',
      SVC_TOWER_LOG_LEVEL: '',
    });
    expect(cmd.opts()).toMatchObject({
      listen: '0.0.0.0:9000',
      dataDir: '/var/lib/svc',
      rateLimit: '10/1s',
      wsCompression: true,
      logLevel: 'info',
      eventRetention: '7d',
    });
    expect(cmd.getOptionValueSource('listen')).toBe('env');
    expect(cmd.getOptionValueSource('rateLimit')).toBe('cli');
    expect(cmd.getOptionValueSource('logLevel')).toBe('default');
    expect(optionLabel(cmd, '--listen')).toBe('SVC_TOWER_LISTEN');
    expect(optionLabel(cmd, '--rate-limit')).toBe('--rate-limit');
    // For a unit's ExecStart: only what was given on the command line.
    expect(givenArgs(cmd)).toEqual(['--rate-limit', '10/1s']);
  });

  it('reads --database from SVC_TOWER_DATABASE, else SVC_DATABASE_URL', () => {
    expect(parse([], { SVC_DATABASE_URL: 'postgres://a/b' }).opts().database).toBe('postgres://a/b');
    expect(
      parse([], { SVC_DATABASE_URL: 'postgres://a/b', SVC_TOWER_DATABASE: 'postgres://c/d' }).opts().database,
    ).toBe('postgres://c/d');
    expect(
      parse(['--database', 'postgres://e/f'], { SVC_TOWER_DATABASE: 'postgres://c/d' }).opts().database,
    ).toBe('postgres://e/f');
  });

  it('spells booleans as 1/0 and refuses anything else, naming the variable', () => {
    expect(parse([], { SVC_TOWER_WS_COMPRESSION: 'off' }).opts().wsCompression).toBe(false);
    expect(parse([], { SVC_TOWER_WS_COMPRESSION: 'TRUE' }).opts().wsCompression).toBe(true);
    expect(() => parse([], { SVC_TOWER_WS_COMPRESSION: 'maybe' })).toThrow(
      new UsageError('invalid SVC_TOWER_WS_COMPRESSION="maybe": use 1 or 0 (true/false, yes/no, on/off)'),
    );
  });

  it('documents every variable in docs/configuration.md', () => {
    const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    const cmd = serveOptions(new Command('serve'));
    const names = (cmd.options as Option[])
      .filter((o) => o.long !== '--help')
      .map((o) => towerEnvName(o.long ?? ''));
    expect(names.length).toBeGreaterThan(10);
    expect(names.filter((n) => !doc.includes(`\`${n}\``))).toEqual([]);
  });
});
