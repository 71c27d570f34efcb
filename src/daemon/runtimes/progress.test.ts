import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../lib/clock.js';
import { MAX_TEXT, ProgressCoalescer, type ProgressUpdate, progressOfAcpUpdate } from './progress.js';

describe('ACP updates as progress', () => {
  it('maps message, tool and plan updates', () => {
    expect(
      progressOfAcpUpdate({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'hi' } }),
    ).toEqual({
      kind: 'message',
      text: 'hi',
    });
    expect(
      progressOfAcpUpdate({
        sessionUpdate: 'tool_call',
        toolCallId: 't1',
        title: 'run: ls',
        kind: 'execute',
        status: 'in_progress',
      }),
    ).toEqual({
      kind: 'tool_call',
      text: 'run: ls',
      data: { tool_call_id: 't1', status: 'in_progress', tool_kind: 'execute' },
    });
    expect(
      progressOfAcpUpdate({
        sessionUpdate: 'tool_call_update',
        toolCallId: 't1',
        status: 'completed',
        content: [{ type: 'content', content: { type: 'text', text: 'out' } }],
      }),
    ).toEqual({ kind: 'tool_call_update', text: 'out', data: { tool_call_id: 't1', status: 'completed' } });
    expect(
      progressOfAcpUpdate({
        sessionUpdate: 'plan',
        entries: [{ content: 'a', status: 'pending', priority: 'high' }],
      }),
    ).toEqual({ kind: 'plan', data: { entries: [{ content: 'a', status: 'pending' }] } });
  });
});

describe('progress coalescing', () => {
  it('merges text chunks of one kind until the kind changes', () => {
    const out: ProgressUpdate[] = [];
    const c = new ProgressCoalescer((u) => out.push(u), new FakeClock(0));
    c.push({ kind: 'message', text: 'a' });
    c.push({ kind: 'message', text: 'b' });
    c.push({ kind: 'thought', text: 'c' });
    c.push({ kind: 'tool_call', text: 'run', data: { tool_call_id: 't' } });
    c.push({ kind: 'message', text: 'd' });
    c.flush();
    expect(out).toEqual([
      { kind: 'message', text: 'ab' },
      { kind: 'thought', text: 'c' },
      { kind: 'tool_call', text: 'run', data: { tool_call_id: 't' } },
      { kind: 'message', text: 'd' },
    ]);
  });

  it('emits buffered text after the delay', async () => {
    const clock = new FakeClock(0);
    const out: ProgressUpdate[] = [];
    const c = new ProgressCoalescer((u) => out.push(u), clock, 250);
    c.push({ kind: 'message', text: 'a' });
    await clock.advance(249);
    expect(out).toEqual([]);
    await clock.advance(1);
    expect(out).toEqual([{ kind: 'message', text: 'a' }]);
    expect(clock.pending()).toBe(0);
  });

  it('emits full blocks of MAX_TEXT without waiting', () => {
    const out: ProgressUpdate[] = [];
    const c = new ProgressCoalescer((u) => out.push(u), new FakeClock(0));
    c.push({ kind: 'message', text: 'x'.repeat(MAX_TEXT * 2 + 5) });
    expect(out.map((u) => u.text?.length)).toEqual([MAX_TEXT, MAX_TEXT]);
    c.flush();
    expect(out.map((u) => u.text?.length)).toEqual([MAX_TEXT, MAX_TEXT, 5]);
  });
});
