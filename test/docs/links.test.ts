// The documentation's cross-references resolve: every relative link of README.md and docs/*.md,
// every bare `docs/<name>.md` it mentions, and every #anchor into a page, names something that
// exists (api.md once pointed at a docs/mesh-tasks.md that never did).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const pages = [
  join(ROOT, 'README.md'),
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => join(ROOT, 'docs', f)),
];

/** GitHub's heading anchor: lowercase, punctuation dropped, spaces to dashes. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug((m[1] as string).replace(/`/g, ''))));
}

function referencesOf(file: string): { target: string; anchor: string | null }[] {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  const refs: { target: string; anchor: string | null }[] = [];
  for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const link = m[1] as string;
    if (/^[a-z]+:/.test(link)) continue; // https:, mailto:
    const [path, anchor] = link.split('#') as [string, string | undefined];
    refs.push({ target: path === '' ? file : resolve(dirname(file), path), anchor: anchor ?? null });
  }
  // Bare mentions: "(…, docs/mesh.md)", "see docs/worker.md".
  for (const m of text.matchAll(/(?<![\w/([])docs\/[\w.-]+\.md/g)) {
    refs.push({ target: join(ROOT, m[0]), anchor: null });
  }
  return refs;
}

describe('documentation links', () => {
  it('point at files and headings that exist', () => {
    const broken: string[] = [];
    for (const page of pages) {
      for (const r of referencesOf(page)) {
        const from = relative(ROOT, page);
        if (!existsSync(r.target)) broken.push(`${from}: ${relative(ROOT, r.target)}`);
        else if (r.anchor && r.target.endsWith('.md') && !anchorsOf(r.target).has(r.anchor)) {
          broken.push(`${from}: ${relative(ROOT, r.target)}#${r.anchor}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});
