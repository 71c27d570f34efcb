import { describe, expect, it } from 'vitest';
import { UsageError } from '../run.js';
import { defaultListenBacklog, parseAdvertiseUrl, parseCount, parseMeshInFlight } from './tower.js';

describe('parseMeshInFlight', () => {
  it.each([
    ['1', 1],
    ['4', 4],
    [' 16 ', 16],
  ])('reads %j as %i', (text, n) => {
    expect(parseMeshInFlight(text)).toBe(n);
  });

  it.each(['0', '-1', '2.5', 'four', '', '1e3'])('refuses %j as a usage error', (text) => {
    expect(() => parseMeshInFlight(text)).toThrow(UsageError);
  });
});

describe('parseCount', () => {
  it('takes non-negative integers, 0 only where it means no limit, and names the option otherwise', () => {
    expect(parseCount('4096', '--listen-backlog', false)).toBe(4096);
    expect(parseCount('0', '--max-node-channels', true)).toBe(0);
    expect(() => parseCount('0', '--listen-backlog', false)).toThrow(
      'invalid --listen-backlog "0": expected a positive integer',
    );
    expect(() => parseCount('-1', 'SVC_TOWER_MAX_NODE_CHANNELS', true)).toThrow(
      'invalid SVC_TOWER_MAX_NODE_CHANNELS "-1": expected a non-negative integer',
    );
  });
});

describe('defaultListenBacklog', () => {
  it("is the kernel's somaxconn when it can be read, else 4096", () => {
    expect(defaultListenBacklog(() => '65535\n')).toBe(65535);
    expect(
      defaultListenBacklog(() => {
        throw new Error('ENOENT');
      }),
    ).toBe(4096);
    expect(defaultListenBacklog(() => 'garbage')).toBe(4096);
  });
});

describe('parseAdvertiseUrl', () => {
  it('takes an http(s) base URL and refuses paths, queries and other schemes', () => {
    expect(parseAdvertiseUrl('http://10.0.0.5:8008/', '--advertise-url')).toBe('http://10.0.0.5:8008');
    expect(parseAdvertiseUrl('https://tower-1.internal', '--advertise-url')).toBe('https://tower-1.internal');
    for (const bad of ['10.0.0.5:8008', 'ftp://x', 'http://x/api', 'http://x/?a=1']) {
      expect(() => parseAdvertiseUrl(bad, '--advertise-url')).toThrow(`invalid --advertise-url "${bad}"`);
    }
  });
});
