import { describe, expect, it } from 'vitest';
import type { BlockCodec } from '../store/event-blocks.js';
import { eventsFromRow } from './event-log.js';

describe('eventsFromRow', () => {
  const row = {
    id: '5001',
    ts: '2026-11-24T10:00:00.000Z',
    type: 'matrix',
    domain_id: null,
    mission_id: null,
    agent_id: null,
    status: null,
  };
  /** A compact form of the test's own: `{pair: [a, b]}` holds two events. */
  const pairs: BlockCodec = {
    tag: 'pair',
    expand: (block) =>
      (block.pair as string[]).map(
        (x) => ['d', 'm', null, 'ok', { x }] as ReturnType<BlockCodec['expand']>[0],
      ),
  };

  it('reads a row that is one event as that event', () => {
    const [ev, ...rest] = eventsFromRow(
      { ...row, domain_id: 'd', agent_id: 'a', status: 's', n: null, payload: '{"k":1}' },
      [],
    );
    expect(rest).toEqual([]);
    expect(ev).toEqual({
      id: '5001',
      ts: row.ts,
      type: 'matrix',
      domain_id: 'd',
      mission_id: null,
      agent_id: 'a',
      status: 's',
      payload: { k: 1 },
    });
  });

  it("numbers a block's events from the row's id on, whole or in a codec's compact form", () => {
    const whole = [
      ['d', 'm', null, 'ok', { x: 'a' }],
      ['d', 'm', null, 'ok', { x: 'b' }],
    ];
    const a = eventsFromRow({ ...row, n: 2, payload: JSON.stringify(whole) }, [pairs]);
    const b = eventsFromRow({ ...row, n: 2, payload: JSON.stringify({ pair: ['a', 'b'] }) }, [pairs]);
    expect(b).toEqual(a);
    expect(b.map((e) => [e.id, e.payload])).toEqual([
      ['5001', { x: 'a' }],
      ['5002', { x: 'b' }],
    ]);
  });

  it('refuses a compact block no codec it was given reads', () => {
    expect(() => eventsFromRow({ ...row, n: 1, payload: '{"other":[]}' }, [pairs])).toThrow(/unknown form/);
  });
});
