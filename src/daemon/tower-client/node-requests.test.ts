import { describe, expect, it } from 'vitest';
import { SvcError } from '../../protocol/errors.js';
import { answerNodeRequest, type Invoke } from './node-requests.js';

const signal = new AbortController().signal;

describe('answerNodeRequest', () => {
  const calls: [string, unknown][] = [];
  const invoke: Invoke = async (method, params) => {
    calls.push([method, params]);
    if (method === 'agent.list') return { items: [{ id: 'a1', state: 'running' }] };
    if (method === 'cron.list') return { jobs: [{ name: 'nightly' }] };
    if (method === 'agent.restart' && (params as { id: string }).id === 'ghost')
      throw new SvcError('agent_not_found', 'no agent ghost');
    if (method === 'agent.pause') throw new Error('boom with /secret/path');
    return { id: (params as { id: string }).id, state: 'running' };
  };

  it('answers node.status with agent.list and cron.list', async () => {
    expect(
      await answerNodeRequest(
        { type: 'node.request', request_id: 'r1', method: 'node.status', params: {} },
        invoke,
        signal,
      ),
    ).toEqual({
      type: 'node.response',
      request_id: 'r1',
      result: { agents: [{ id: 'a1', state: 'running' }], cron: { jobs: [{ name: 'nightly' }] } },
    });
  });

  it('runs an agent action as the mgmt method and passes its error code on', async () => {
    calls.length = 0;
    const ok = await answerNodeRequest(
      { type: 'node.request', request_id: 'r2', method: 'agent.restart', params: { id: 'a1' } },
      invoke,
      signal,
    );
    expect(ok).toEqual({ type: 'node.response', request_id: 'r2', result: { id: 'a1', state: 'running' } });
    expect(calls).toEqual([['agent.restart', { id: 'a1' }]]);
    const missing = await answerNodeRequest(
      { type: 'node.request', request_id: 'r3', method: 'agent.restart', params: { id: 'ghost' } },
      invoke,
      signal,
    );
    expect(missing).toEqual({
      type: 'node.response',
      request_id: 'r3',
      error: { code: 'agent_not_found', message: 'no agent ghost' },
    });
  });

  it('refuses methods outside the list and hides unexpected failures', async () => {
    calls.length = 0;
    const other = await answerNodeRequest(
      // A newer tower (or a forged message) asking for something this node does not serve.
      {
        type: 'node.request',
        request_id: 'r4',
        method: 'agent.stop' as 'agent.restart',
        params: { id: 'a1' },
      },
      invoke,
      signal,
    );
    expect(other.error?.code).toBe('bad_request');
    expect(calls).toEqual([]);
    const crash = await answerNodeRequest(
      { type: 'node.request', request_id: 'r5', method: 'agent.pause', params: { id: 'a1' } },
      invoke,
      signal,
    );
    expect(crash.error).toEqual({ code: 'internal', message: 'the node failed to answer' });
  });
});
