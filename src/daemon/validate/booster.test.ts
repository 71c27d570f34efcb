import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { WAT, watToWasm, writeWasm } from '../../../test/support/wasm.js';
import { systemClock } from '../../lib/clock.js';
import { type Booster, EMBEDDED_BOOSTER_WASM, embeddedBooster, loadBooster } from './booster.js';

const payload = new TextEncoder().encode('{"tool":"get_mesh_task","args":{"task_id":"mt_1"}}');
const tmp = makeTempDir();
const open: Booster[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((b) => b.close()));
});

async function booster(wat: string, timeLimitMs = 200): Promise<Booster> {
  const b = await loadBooster(await writeWasm(tmp.dir, `m${open.length}-${Math.random()}`, wat), {
    clock: systemClock,
    timeLimitMs,
  });
  open.push(b);
  return b;
}

describe('Wasm booster', () => {
  it('embeds the module its comment shows, which passes a non-empty payload only', async () => {
    const src = /\(module[\s\S]*?\(i32\.const 0\)\)\)\)/.exec(
      (await import('node:fs'))
        .readFileSync(new URL('./booster.ts', import.meta.url), 'utf8')
        .replace(/\n \*/g, '\n'),
    );
    expect(Buffer.from(await watToWasm(src?.[0] ?? '')).equals(EMBEDDED_BOOSTER_WASM)).toBe(true);
    const b = embeddedBooster();
    expect(await b.check(payload)).toEqual({ verdict: 'pass' });
    expect(await b.check(new Uint8Array())).toEqual({ verdict: 'reject' });
    // Payloads past the first 64 KiB page grow the memory.
    expect(await b.check(new Uint8Array(300_000).fill(32))).toEqual({ verdict: 'pass' });
  });

  it.each([
    ['reject', WAT.reject, 'reject'],
    ['pass', WAT.pass, 'pass'],
    ['short-circuit', WAT.shortCircuit, 'short_circuit'],
  ])('maps a module that returns %s to its verdict', async (_n, wat, verdict) => {
    const b = await booster(wat);
    expect(b.loadError).toBeNull();
    expect(await b.check(payload)).toEqual({ verdict });
    expect(await b.check(payload)).toEqual({ verdict });
  });

  it('fails the call of a module that traps, and the next call runs on a fresh instance', async () => {
    const b = await booster(WAT.byMarker);
    expect(await b.check(new TextEncoder().encode('{"x":"#trap"}'))).toEqual({
      verdict: 'error',
      reason: 'trapped: unreachable',
    });
    expect(await b.check(payload)).toEqual({ verdict: 'pass' });
  });

  it('terminates a module that loops at the time limit, then serves the next call', async () => {
    const b = await booster(WAT.byMarker, 100);
    const looping = b.check(new TextEncoder().encode('{"x":"#loop"}'));
    const after = b.check(new TextEncoder().encode('{"x":"#reject"}'));
    expect(await looping).toEqual({
      verdict: 'error',
      reason: 'validate() ran longer than the 100 ms time limit',
    });
    expect(await after).toEqual({ verdict: 'reject' });
  });

  it('refuses a module without the booster exports, on every call, without throwing', async () => {
    const b = await booster(WAT.missingExports);
    expect(b.loadError).toMatch(/does not export alloc \(function\), validate \(function\)$/);
    expect(await b.check(payload)).toEqual({ verdict: 'error', reason: b.loadError });
  });

  it('refuses a file that is not Wasm and a verdict outside 0..2', async () => {
    const notWasm = `${tmp.dir}/not.wasm`;
    (await import('node:fs')).writeFileSync(notWasm, 'hello');
    const b = await loadBooster(notWasm, { clock: systemClock });
    open.push(b);
    expect(b.loadError).toMatch(/^booster .*not\.wasm: /);
    const missing = await loadBooster(`${tmp.dir}/missing.wasm`, { clock: systemClock });
    expect(missing.loadError).toMatch(/ENOENT/);
    const odd = await booster(WAT.badVerdict);
    expect(await odd.check(payload)).toEqual({
      verdict: 'error',
      reason: 'validate() returned 7: expected 0 (reject), 1 (pass) or 2 (answer)',
    });
  });
});
