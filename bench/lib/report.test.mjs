// BENCHMARKS.md's summary table is rebuilt from the rows each section carries, never kept by hand.
import { describe, expect, it } from 'vitest';
import { sections, withSummary } from './report.mjs';

const rows = (date, list) =>
  `<!-- bench:rows ${JSON.stringify({ date, machine: '2 cores', rows: list })} -->`;
const doc = [
  '# Benchmarks',
  '',
  'Intro.',
  '',
  `<!-- bench:http:start -->\n${rows('2026-01-02', [{ peer: 'bare', target: '≤ 2x', result: '1.5x | ok', met: 'yes' }])}\n## http\n<!-- bench:http:end -->`,
  '',
  '<!-- bench:daemon:start -->\n## daemon\n<!-- bench:daemon:end -->',
  '',
].join('\n');

describe('the summary table', () => {
  it('lists each section in file order, with its rows, or says it has none', () => {
    expect(sections(doc).map((s) => [s.name, s.summary?.rows.length ?? null])).toEqual([
      ['http', 1],
      ['daemon', null],
    ]);
    const text = withSummary(doc);
    const table = text.slice(
      text.indexOf('<!-- bench:summary:start -->'),
      text.indexOf('<!-- bench:http:start -->'),
    );
    expect(table.split('\n').filter((l) => l.startsWith('| ['))).toEqual([
      '| [http](#http) | bare | ≤ 2x | 1.5x \\| ok | yes | 2026-01-02 | 2 cores |',
      '| [daemon](#daemon) | – | – | its bench writes no summary rows: see the section | – | – | – |',
    ]);
    expect(text.indexOf('Intro.')).toBeLessThan(text.indexOf('<!-- bench:summary:start -->'));
  });

  it('replaces the table it built before rather than adding another', () => {
    const once = withSummary(doc);
    expect(withSummary(once)).toBe(once);
    expect(once.split('<!-- bench:summary:start -->').length).toBe(2);
  });
});
