import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../test/support/tmp.js';
import { createLogger } from '../lib/log.js';
import { openProcessLog } from './process-log.js';
import { UsageError } from './run.js';

describe('the log of svc tower serve and svcd run', () => {
  let tmp: ReturnType<typeof makeTempDir>;
  afterEach(() => tmp?.remove());

  it('writes JSON lines to --log-file and rotates it by size, each file of whole lines', async () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'logs', 'svcd.log');
    const { log, close } = await openProcessLog(
      { logLevel: 'info', logFile: file, logMaxBytes: '4096', logKeep: '2' },
      { name: 'svcd', stderrIsTTY: true },
    );
    for (let i = 0; i < 200; i++) log.info({ i }, 'a line of the daemon');
    close();
    expect(readdirSync(join(tmp.dir, 'logs')).sort()).toEqual(['svcd.log', 'svcd.log.1', 'svcd.log.2']);
    const seen: number[] = [];
    for (const f of [`${file}.2`, `${file}.1`, file]) {
      const text = readFileSync(f, 'utf8');
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(4096);
      for (const line of text.trimEnd().split('\n')) {
        // A file is JSON even at a terminal: pretty is for stderr.
        const r = JSON.parse(line) as { i: number; name: string; time: number };
        expect(r.name).toBe('svcd');
        expect(typeof r.time).toBe('number');
        seen.push(r.i);
      }
    }
    // The newest lines, in order, with none missing between the oldest kept and the last.
    expect(seen.at(-1)).toBe(199);
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, k) => 200 - seen.length + k));
  });

  it('logs a crash to the file before Node prints it, and stops listening when closed', async () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'tower.log');
    const before = process.listenerCount('uncaughtExceptionMonitor');
    const { close } = await openProcessLog(
      { logLevel: 'info', logFile: file, logMaxBytes: '10485760', logKeep: '3' },
      { name: 'tower', stderrIsTTY: false },
    );
    (process as NodeJS.EventEmitter).emit('uncaughtExceptionMonitor', new Error('boom'), 'uncaughtException');
    close();
    expect(process.listenerCount('uncaughtExceptionMonitor')).toBe(before);
    const r = JSON.parse(readFileSync(file, 'utf8').trim()) as {
      level: number;
      msg: string;
      origin: string;
      err: { message: string; stack: string };
    };
    expect(r).toMatchObject({ level: 60, msg: 'uncaught exception: exiting', origin: 'uncaughtException' });
    expect(r.err.message).toBe('boom');
    expect(r.err.stack).toContain('Error: boom');
  });

  it('refuses rotation numbers out of range and an unknown format, naming the flag', async () => {
    tmp = makeTempDir();
    const open = (flags: Record<string, string>) =>
      openProcessLog(
        {
          logLevel: 'info',
          logFile: join(tmp.dir, 'x.log'),
          logMaxBytes: '10485760',
          logKeep: '3',
          ...flags,
        },
        { name: 'tower', stderrIsTTY: false, label: (l) => (l === '--log-keep' ? 'SVC_TOWER_LOG_KEEP' : l) },
      );
    await expect(open({ logMaxBytes: '100' })).rejects.toThrow(
      new UsageError('invalid --log-max-bytes "100": a whole number from 4096 to 9007199254740991'),
    );
    await expect(open({ logKeep: '101' })).rejects.toThrow(
      new UsageError('invalid SVC_TOWER_LOG_KEEP "101": a whole number from 0 to 100'),
    );
    await expect(open({ logFormat: 'xml' })).rejects.toThrow(
      new UsageError('invalid --log-format "xml": json or pretty'),
    );
  });
});

describe('pretty logs', () => {
  it('turn each pino line into a line with a readable time, keeping epoch ms in JSON', () => {
    const out: string[] = [];
    const pretty = createLogger({ name: 'tower', pretty: true, stream: { write: (l) => out.push(l) } });
    const json = createLogger({ name: 'tower', stream: { write: (l) => out.push(l) } });
    pretty.child({ component: 'store' }).warn({ code: 'SQLITE_FULL' }, 'writes failing');
    json.info('plain');
    expect(out[0]).toMatch(
      /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} WARN {2}tower store: writes failing code=SQLITE_FULL\n$/,
    );
    expect(JSON.parse(out[1] as string)).toMatchObject({
      level: 30,
      name: 'tower',
      msg: 'plain',
      time: expect.any(Number),
    });
  });
});
