import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { nextNightly } from './nightly.js';

const at = (s: string) => new Date(s).getTime();
const iso = (ms: number) => new Date(ms).toISOString();

describe('nightly restart time', () => {
  it('is the next occurrence of the local time in the configured zone', () => {
    expect(iso(nextNightly(at('2025-06-10T12:00:00Z'), { hour: 3, minute: 30 }, 'Europe/Berlin'))).toBe(
      '2025-06-11T01:30:00.000Z',
    );
    expect(iso(nextNightly(at('2025-06-10T00:00:00Z'), { hour: 3, minute: 30 }, 'Europe/Berlin'))).toBe(
      '2025-06-10T01:30:00.000Z',
    );
  });

  it('is strictly after the given time, so a restart at the time schedules the next night', () => {
    expect(iso(nextNightly(at('2025-06-11T01:30:00Z'), { hour: 3, minute: 30 }, 'Europe/Berlin'))).toBe(
      '2025-06-12T01:30:00.000Z',
    );
  });

  it('fires at the first valid minute when the time does not exist (spring forward)', () => {
    // 2025-03-30 in Berlin: 02:00 CET jumps to 03:00 CEST; 02:30 never happens.
    const first = nextNightly(at('2025-03-29T12:00:00Z'), { hour: 2, minute: 30 }, 'Europe/Berlin');
    expect(iso(first)).toBe('2025-03-30T01:00:00.000Z');
    expect(iso(nextNightly(first, { hour: 2, minute: 30 }, 'Europe/Berlin'))).toBe(
      '2025-03-31T00:30:00.000Z',
    );
  });

  it('fires once when the time occurs twice (fall back)', () => {
    // 2025-10-26 in Berlin: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    const first = nextNightly(at('2025-10-25T12:00:00Z'), { hour: 2, minute: 30 }, 'Europe/Berlin');
    expect(iso(first)).toBe('2025-10-26T00:30:00.000Z');
    expect(iso(nextNightly(first, { hour: 2, minute: 30 }, 'Europe/Berlin'))).toBe(
      '2025-10-27T01:30:00.000Z',
    );
  });

  it("follows the daemon's TZ when no zone is configured", () => {
    // A process of its own, because TZ is read at start; it loads the build (npm test builds first).
    const mod = fileURLToPath(new URL('./nightly.ts', import.meta.url))
      .replace(/([/\\])src([/\\])/, '$1dist$2')
      .replace(/\.ts$/, '.js');
    const script = `import { nextNightly } from ${JSON.stringify(mod)};
const a = nextNightly(Date.parse('2025-03-29T12:00:00Z'), { hour: 2, minute: 30 }, null);
const b = nextNightly(a, { hour: 2, minute: 30 }, null);
console.log(new Date(a).toISOString(), new Date(b).toISOString());`;
    const run = (tz: string) =>
      spawnSync(process.execPath, ['--input-type=module', '-e', script], {
        env: { ...process.env, TZ: tz },
        encoding: 'utf8',
      });
    const berlin = run('Europe/Berlin');
    expect(berlin.stderr).toBe('');
    expect(berlin.stdout.trim()).toBe('2025-03-30T01:00:00.000Z 2025-03-31T00:30:00.000Z');
    expect(run('America/New_York').stdout.trim()).toBe('2025-03-30T06:30:00.000Z 2025-03-31T06:30:00.000Z');
  });
});
