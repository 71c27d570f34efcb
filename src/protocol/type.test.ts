import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';

// Every schema the protocol modules export, built by ./type.ts, must be the very object TypeBox's
// own builder makes: same keys in the same order, same Kind/Optional symbols.
const dir = fileURLToPath(new URL('.', import.meta.url));
const modules = readdirSync(dir).filter(
  (f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && f !== 'type.ts',
);

/** JSON text with the symbol keys spelled out, so key order and symbols both count. */
function canonical(v: unknown): string {
  const walk = (x: unknown): unknown => {
    if (Array.isArray(x)) return x.map(walk);
    if (x === null || typeof x !== 'object') return x;
    const out: Record<string, unknown> = {};
    for (const k of Reflect.ownKeys(x)) {
      const value = (x as Record<string | symbol, unknown>)[k];
      if (typeof value === 'function') continue;
      out[typeof k === 'symbol' ? `@@${k.description}` : k] = walk(value);
    }
    return out;
  };
  return JSON.stringify(walk(v), null, 1);
}

async function load(file: string, typebox: boolean): Promise<Record<string, unknown>> {
  vi.resetModules();
  if (typebox) vi.doMock('./type.js', async () => ({ Type: (await import('@sinclair/typebox')).Type }));
  else vi.doUnmock('./type.js');
  return (await import(/* @vite-ignore */ `./${file.replace(/\.ts$/, '.js')}`)) as Record<string, unknown>;
}

afterEach(() => {
  vi.doUnmock('./type.js');
});

describe('protocol schema builder', () => {
  it('finds the protocol modules', () => {
    expect(modules.length).toBeGreaterThan(10);
  });
  it.each(modules)('%s: every exported schema equals TypeBox’s', async (file) => {
    const lite = await load(file, false);
    const typebox = await load(file, true);
    expect(Object.keys(lite)).toEqual(Object.keys(typebox));
    for (const name of Object.keys(lite)) expect(canonical(lite[name]), name).toBe(canonical(typebox[name]));
  });
  it('the lite builder is what the modules use (no TypeBox at run time)', async () => {
    const { Type } = await import('./type.js');
    const tb = (await import('@sinclair/typebox')).Type;
    expect(Type).not.toBe(tb);
    expect(canonical(Type.Union([Type.String(), Type.Null()], { description: 'x' }))).toBe(
      canonical(tb.Union([tb.String(), tb.Null()], { description: 'x' })),
    );
  });
});
