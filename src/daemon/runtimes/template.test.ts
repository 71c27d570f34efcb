import { describe, expect, it } from 'vitest';
import { renderCommand, resolveSelf, unknownPlaceholder } from './template.js';

describe('command templates', () => {
  it('substitutes placeholders inside single arguments, never splitting them', () => {
    const prompt = `fix "it"; rm -rf / && echo $HOME\nnext line`;
    expect(
      renderCommand(['claude', '-p', '{prompt}', '--cwd={workdir}', '--task', '{task_id}'], {
        prompt,
        workdir: '/w/t 1',
        task_id: 'mt_1',
      }),
    ).toEqual({ argv: ['claude', '-p', prompt, '--cwd=/w/t 1', '--task', 'mt_1'], promptInArgs: true });
  });

  it('reports a template without {prompt}, whose prompt then goes to stdin', () => {
    expect(renderCommand(['agent', '--stdin'], { prompt: 'p', workdir: '/w', task_id: '' })).toEqual({
      argv: ['agent', '--stdin'],
      promptInArgs: false,
    });
  });

  it('leaves other braces alone and names unknown placeholders', () => {
    expect(renderCommand(['x', '{"a":1}'], { prompt: 'p', workdir: '/w', task_id: '' }).argv).toEqual([
      'x',
      '{"a":1}',
    ]);
    expect(unknownPlaceholder(['x', '{prompt}', '{taskid}'])).toBe('{taskid}');
    expect(unknownPlaceholder(['x', '{prompt}', '{"a":1}'])).toBeNull();
  });

  it('runs a leading "svcd" as this install', () => {
    expect(
      resolveSelf(['svcd', 'reference-agent', '--acp'], ['/usr/bin/node', '/pkg/dist/cli/svcd.js']),
    ).toEqual(['/usr/bin/node', '/pkg/dist/cli/svcd.js', 'reference-agent', '--acp']);
    expect(resolveSelf(['claude', '-p'], ['node', 'svcd.js'])).toEqual(['claude', '-p']);
  });
});
