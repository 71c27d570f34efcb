import { describe, expect, it } from 'vitest';
import { hasCapabilities } from './capabilities.js';

describe('hasCapabilities', () => {
  it.each([
    [[], [], true],
    [['gpu'], [], true],
    [[], ['gpu'], false],
    [['gpu', 'linux'], ['gpu'], true],
    [['gpu', 'linux'], ['linux', 'gpu'], true],
    [['gpu'], ['gpu', 'linux'], false],
    [['GPU'], ['gpu'], false],
  ] as const)('an agent with %j may take a task requiring %j: %s', (have, need, ok) => {
    expect(hasCapabilities({ capabilities: JSON.stringify(have) }, need)).toBe(ok);
  });
});
