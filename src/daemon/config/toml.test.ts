import { describe, expect, it } from 'vitest';
import { parseTomlText } from './toml.js';

describe('TOML line locator', () => {
  it('locates keys in arrays of tables, sub-tables, dotted and quoted keys', () => {
    const doc = parseTomlText(
      'f.toml',
      [
        '# agents',
        '[[agent]]',
        'id = "a"',
        '',
        '[[agent]]',
        'id = "b"',
        'env.HOME = "/x"',
        '"quoted key" = 1',
        '[agent.extra]',
        'k = """',
        'id = "not a key"',
        '"""',
        'z = 2',
      ].join('\n'),
    );
    expect(doc.lineOf(['agent', 0, 'id'])).toBe(3);
    expect(doc.lineOf(['agent', 1, 'id'])).toBe(6);
    expect(doc.lineOf(['agent', 1, 'env', 'HOME'])).toBe(7);
    expect(doc.lineOf(['agent', 1, 'quoted key'])).toBe(8);
    expect(doc.lineOf(['agent', 1, 'extra'])).toBe(9);
    expect(doc.lineOf(['agent', 1, 'extra', 'z'])).toBe(13);
    expect(doc.lineOf(['agent', 1, 'missing'])).toBe(5);
  });
});
