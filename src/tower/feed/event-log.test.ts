import { describe, expect, it } from 'vitest';
import { eventsFromRow } from './event-log.js';

describe('eventsFromRow', () => {
  const row = {
    id: '5001',
    ts: '2026-11-24T10:00:00.000Z',
    type: 'matrix',
    domain_id: null,
    mission_id: null,
  };
  const whole = [
    [
      'dom_a',
      'mis_a',
      'ag_a',
      'failed',
      {
        entity: 'mesh_task',
        action: 'failed',
        id: 'mt_1',
        title: 'a "quoted" title',
        state: 'failed',
        attempt: 2,
        reason: 'boom',
      },
    ],
    [
      'dom_b',
      'mis_b',
      null,
      'failed',
      {
        entity: 'mesh_task',
        action: 'failed',
        id: 'mt_2',
        title: 'run',
        state: 'failed',
        attempt: 1,
        reason: null,
        parent_id: 'mt_0',
      },
    ],
  ];

  it('expands a compact mesh block to the events a whole block holds, members in the same order', () => {
    const compact = {
      mesh_task: 'failed',
      t: [
        ['dom_a', 'mis_a', 'ag_a', 'failed', 'mt_1', 'a "quoted" title', 2, null, { reason: 'boom' }],
        ['dom_b', 'mis_b', null, 'failed', 'mt_2', 'run', 1, 'mt_0', { reason: null }],
      ],
    };
    const a = eventsFromRow({ ...row, agent_id: null, status: null, n: 2, payload: JSON.stringify(whole) });
    const b = eventsFromRow({ ...row, agent_id: null, status: null, n: 2, payload: JSON.stringify(compact) });
    expect(b).toEqual(a);
    // The same JSON text too: clients see identical payloads whichever form was stored.
    expect(b.map((e) => JSON.stringify(e))).toEqual(a.map((e) => JSON.stringify(e)));
    expect(b.map((e) => e.id)).toEqual(['5001', '5002']);
  });

  it('leaves out extra members when a block has none', () => {
    const [ev] = eventsFromRow({
      ...row,
      agent_id: null,
      status: null,
      n: 1,
      payload: JSON.stringify({
        mesh_task: 'claimed',
        t: [['d', 'm', 'ag', 'claimed', 'mt_9', 't', 1, null]],
      }),
    });
    expect(ev?.payload).toEqual({
      entity: 'mesh_task',
      action: 'claimed',
      id: 'mt_9',
      title: 't',
      state: 'claimed',
      attempt: 1,
    });
    expect(Object.keys(ev?.payload ?? {})).toEqual(['entity', 'action', 'id', 'title', 'state', 'attempt']);
  });
});
