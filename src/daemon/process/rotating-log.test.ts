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

describe('rotating log of whole writes', () => {
  let tmp: ReturnType<typeof makeTempDir>;
  afterEach(() => tmp?.remove());

  it('rotates before a line that does not fit, so every file holds whole lines', () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'tower.log');
    const log = new RotatingLog(file, { maxBytes: 100, keep: 5, wholeWrites: true });
    const lines = Array.from({ length: 12 }, (_, i) => `{"n":${i},"pad":"${'x'.repeat(20)}"}\n`);
    for (const l of lines) log.write(l);
    log.close();
    // 36-37 bytes a line: two lines a file, six files.
    const files = [5, 4, 3, 2, 1]
      .map((k) => `${file}.${k}`)
      .concat(file)
      .map((f) => readFileSync(f, 'utf8'));
    expect(files.join('')).toBe(lines.join(''));
    for (const text of files) {
      expect(text.endsWith('\n')).toBe(true);
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(100);
    }
  });

  it('still splits one write larger than a whole file', () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'big.log');
    const log = new RotatingLog(file, { maxBytes: 10, keep: 2, wholeWrites: true });
    log.write('ab\n');
    log.write('x'.repeat(15));
    log.close();
    expect(readFileSync(`${file}.1`, 'utf8')).toBe(`ab\n${'x'.repeat(7)}`);
    expect(readFileSync(file, 'utf8')).toBe('x'.repeat(8));
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
