import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../protocol/events.js';
import { compileSchemaPack, embeddedSchemaPack } from '../../protocol/schema-pack.js';
import type { Booster, BoosterOutcome } from './booster.js';
import { createToolCallValidation } from './pipeline.js';

function setup(outcome: BoosterOutcome) {
  const events: NewEvent[] = [];
  const payloads: string[] = [];
  let t = 1000;
  const booster: Booster = {
    source: 'test.wasm',
    loadError: null,
    check: async (p) => {
      payloads.push(Buffer.from(p).toString('utf8'));
      t += 12.34;
      return outcome;
    },
    close: async () => {},
  };
  const v = createToolCallValidation({
    pack: compileSchemaPack(embeddedSchemaPack()),
    booster,
    emit: (e) => events.push(e),
    micros: () => t,
  });
  return { v, events, payloads };
}

const args = { task_id: 'mt_1' };

describe('tool call validation', () => {
  it('passes a valid call on, handing the booster the call as JSON, and reports it', async () => {
    const { v, events, payloads } = setup({ verdict: 'pass' });
    expect(await v.check('get_mesh_task', args)).toBe('forward');
    expect(payloads).toEqual(['{"tool":"get_mesh_task","args":{"task_id":"mt_1"}}']);
    expect(events).toEqual([
      {
        type: 'progress',
        status: 'pass',
        payload: {
          kind: 'validation',
          tool: 'get_mesh_task',
          booster: 'test.wasm',
          verdict: 'pass',
          stage: 'booster',
          micros: 12.3,
        },
      },
    ]);
  });

  it('answers without the tower on a short-circuit', async () => {
    expect(await setup({ verdict: 'short_circuit' }).v.check('get_mesh_task', args)).toBe('answer');
  });

  it.each([
    [{ verdict: 'reject' } as const, 'get_mesh_task: rejected by the booster (test.wasm)'],
    [
      { verdict: 'error', reason: 'trapped: unreachable' } as const,
      'get_mesh_task: the booster failed, so the call is refused: trapped: unreachable',
    ],
  ])('refuses a call the booster answers %j with validation_rejected', async (outcome, message) => {
    const { v, events } = setup(outcome);
    await expect(v.check('get_mesh_task', args)).rejects.toMatchObject({
      code: 'validation_rejected',
      message,
    });
    expect(events[0]?.status).toBe(outcome.verdict);
  });

  it('stops a payload the schema pack refuses before the booster runs', async () => {
    const { v, events, payloads } = setup({ verdict: 'pass' });
    await expect(v.check('get_mesh_task', { task_id: 7 })).rejects.toMatchObject({
      code: 'validation_failed',
    });
    expect(payloads).toEqual([]);
    expect(events[0]?.payload).toMatchObject({ verdict: 'reject', stage: 'schema', micros: 0 });
  });
});
