import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import type { AgentStatus } from '../../protocol/agents.js';
import { SvcError } from '../../protocol/errors.js';
import { journalctlArgs } from './journal.js';
import { defaultSources, resolveSource, type SourceDeps } from './sources.js';

describe('log sources', () => {
  let tmp: ReturnType<typeof makeTempDir>;
  afterEach(() => tmp?.remove());

  const svcdDown = (home: string): SourceDeps => ({
    home,
    env: { HOME: join(home, 'user') },
    agentStatus: async () => {
      throw new SvcError('unavailable', 'svcd is not running');
    },
  });
  const touch = (file: string, mtimeSec?: number) => {
    mkdirSync(join(file, '..'), { recursive: true });
    writeFileSync(file, '');
    if (mtimeSec !== undefined) utimesSync(file, mtimeSec, mtimeSec);
  };

  it("finds the tower's log where svc up writes it", async () => {
    tmp = makeTempDir();
    await expect(resolveSource('tower', svcdDown(tmp.dir))).rejects.toMatchObject({ code: 'not_found' });
    touch(join(tmp.dir, 'logs', 'tower.log'));
    expect(await resolveSource('tower', svcdDown(tmp.dir))).toEqual({
      name: 'tower',
      kind: 'file',
      file: join(tmp.dir, 'logs', 'tower.log'),
    });
  });

  it("reads the tower's user unit from the journal, unless svc up runs the tower", async () => {
    tmp = makeTempDir();
    touch(join(tmp.dir, 'user', '.config', 'systemd', 'user', 'svc-tower.service'));
    touch(join(tmp.dir, 'logs', 'tower.log'));
    expect(await resolveSource('tower', svcdDown(tmp.dir))).toEqual({
      name: 'tower',
      kind: 'journal',
      unit: 'svc-tower.service',
    });
    writeFileSync(join(tmp.dir, 'up.json'), JSON.stringify({ tower: { pid: 1, url: 'http://t' } }));
    expect(await resolveSource('tower', svcdDown(tmp.dir))).toMatchObject({ kind: 'file' });
  });

  it("takes svcd's log from daemon.json: a file when detached, the journal under systemd", async () => {
    tmp = makeTempDir();
    const record = join(tmp.dir, 'svcd', 'daemon.json');
    touch(record);
    writeFileSync(record, JSON.stringify({ mode: 'detached', pid: 1, log: '/var/log/x/svcd.log' }));
    expect(await resolveSource('svcd', svcdDown(tmp.dir))).toEqual({
      name: 'svcd',
      kind: 'file',
      file: '/var/log/x/svcd.log',
    });
    writeFileSync(record, JSON.stringify({ mode: 'systemd', backend_url: 'http://t' }));
    expect(await resolveSource('svcd', svcdDown(tmp.dir))).toEqual({
      name: 'svcd',
      kind: 'journal',
      unit: 'svcd.service',
    });
  });

  it("without a record, takes the newer of svc up's and svc daemon up's svcd log", async () => {
    tmp = makeTempDir();
    const up = join(tmp.dir, 'logs', 'svcd.log');
    const daemon = join(tmp.dir, 'svcd', 'logs', 'svcd.log');
    touch(up, 1000);
    touch(daemon, 2000);
    expect(await resolveSource('svcd', svcdDown(tmp.dir))).toMatchObject({ file: daemon });
    touch(up, 3000);
    expect(await resolveSource('svcd', svcdDown(tmp.dir))).toMatchObject({ file: up });
  });

  it("asks svcd where an agent logs: its file, or its systemd unit's journal", async () => {
    tmp = makeTempDir();
    const status = (s: Partial<AgentStatus>): SourceDeps => ({
      home: tmp.dir,
      env: {},
      agentStatus: async () => ({ id: 'ag_1', unit: 'svc-agent-ag_1', log_file: null, ...s }) as AgentStatus,
    });
    expect(await resolveSource('demo', status({ log_file: '/h/svcd/logs/ag_1.log' }))).toEqual({
      name: 'ag_1',
      kind: 'file',
      file: '/h/svcd/logs/ag_1.log',
    });
    expect(await resolveSource('demo', status({ log_file: null }))).toEqual({
      name: 'ag_1',
      kind: 'journal',
      unit: 'svc-agent-ag_1.service',
    });
  });

  it("with svcd down, reads an agent's log where svcd keeps them, and says so when there is none", async () => {
    tmp = makeTempDir();
    await expect(resolveSource('ag_2', svcdDown(tmp.dir))).rejects.toThrow(
      /svcd is not running; without it only an agent id with a log in .* can be shown, and there is no ag_2\.log/,
    );
    touch(join(tmp.dir, 'svcd', 'logs', 'ag_2.log'));
    expect(await resolveSource('ag_2', svcdDown(tmp.dir))).toEqual({
      name: 'ag_2',
      kind: 'file',
      file: join(tmp.dir, 'svcd', 'logs', 'ag_2.log'),
    });
  });

  it('defaults to the tower and svcd, those that have logs', async () => {
    tmp = makeTempDir();
    await expect(defaultSources(svcdDown(tmp.dir))).rejects.toMatchObject({ code: 'not_found' });
    touch(join(tmp.dir, 'logs', 'svcd.log'));
    expect((await defaultSources(svcdDown(tmp.dir))).map((s) => s.name)).toEqual(['svcd']);
    touch(join(tmp.dir, 'logs', 'tower.log'));
    expect((await defaultSources(svcdDown(tmp.dir))).map((s) => s.name)).toEqual(['tower', 'svcd']);
  });
});

describe('journalctl arguments', () => {
  it('asks for the message text of one user unit, with the line count, since and follow', () => {
    expect(journalctlArgs({ unit: 'svcd.service', lines: 100, since: null, follow: false })).toEqual([
      '--user',
      '--unit',
      'svcd.service',
      '--output',
      'cat',
      '--no-pager',
      '--lines',
      '100',
    ]);
    expect(
      journalctlArgs({
        unit: 'svcd.service',
        lines: Number.POSITIVE_INFINITY,
        since: 1_700_000_000_999,
        follow: true,
      }).slice(6),
    ).toEqual(['--lines', 'all', '--since', '@1700000000', '--follow']);
  });
});
