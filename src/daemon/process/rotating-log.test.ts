import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { OutputTail, RotatingLog } from './rotating-log.js';

describe('rotating agent log', () => {
  let tmp: ReturnType<typeof makeTempDir>;
  afterEach(() => tmp?.remove());

  it('rotates by size and keeps a bounded number of files', () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'logs', 'a.log');
    const log = new RotatingLog(file, { maxBytes: 1000, keep: 2 });
    for (let i = 0; i < 100; i++) log.write(`${String(i).padStart(3, '0')} ${'x'.repeat(95)}\n`); // 100 bytes each
    log.close();
    expect(readdirSync(join(tmp.dir, 'logs')).sort()).toEqual(['a.log', 'a.log.1', 'a.log.2']);
    for (const f of ['a.log', 'a.log.1', 'a.log.2'])
      expect(statSync(join(tmp.dir, 'logs', f)).size).toBe(1000);
    // The newest output is in a.log, and nothing older than the kept files survives.
    expect(readFileSync(file, 'utf8').split('\n')[0]?.slice(0, 3)).toBe('090');
    expect(readFileSync(`${file}.2`, 'utf8').slice(0, 3)).toBe('070');
  });

  it('splits a chunk larger than the limit across files', () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'b.log');
    const log = new RotatingLog(file, { maxBytes: 4096, keep: 1 });
    log.write(Buffer.alloc(10_000, 97));
    log.close();
    expect(statSync(file).size).toBe(10_000 - 8192);
    expect(statSync(`${file}.1`).size).toBe(4096);
  });

  it('continues the current file across reopen', () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'c.log');
    new RotatingLog(file, { maxBytes: 100, keep: 1 }).write('a'.repeat(60));
    const again = new RotatingLog(file, { maxBytes: 100, keep: 1 });
    again.write('b'.repeat(60));
    again.close();
    expect(readFileSync(`${file}.1`, 'utf8')).toBe(`${'a'.repeat(60)}${'b'.repeat(40)}`);
    expect(readFileSync(file, 'utf8')).toBe('b'.repeat(20));
  });
});

describe('output tail', () => {
  it('keeps only the last bytes', () => {
    const t = new OutputTail(10);
    t.push('hello ');
    t.push('world, ');
    t.push('and more');
    expect(t.text()).toBe(', and more');
    t.push('x'.repeat(50));
    expect(t.text()).toBe('x'.repeat(10));
  });
});
