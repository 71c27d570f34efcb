import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import type { Approval } from '../../protocol/approvals.js';
import { SvcError } from '../../protocol/errors.js';
import { type ApprovalDecision, type ApprovalsApi, ApprovalWaits } from './approval-waits.js';

/** The tower's approvals in memory; `reachable = false` makes every call fail as a network error would. */
function towerApprovals() {
  const rows = new Map<string, Approval>();
  const calls: string[] = [];
  let reachable = true;
  const check = () => {
    if (!reachable) throw new SvcError('tower_unreachable', 'down');
  };
  const api: ApprovalsApi = {
    async create() {
      throw new Error('not used');
    },
    async get(id) {
      calls.push(`get ${id}`);
      check();
      return rows.get(id) as Approval;
    },
    async reject(id, reason) {
      calls.push(`reject ${id} ${reason}`);
      check();
      const a = rows.get(id) as Approval;
      if (a.status !== 'pending') throw new SvcError('already_decided', 'decided');
      a.status = 'rejected';
      a.reason = reason;
      return a;
    },
  };
  const add = (id: string) =>
    rows.set(id, { id, status: 'pending', reason: null } as unknown as Approval).get(id) as Approval;
  return { api, rows, calls, add, setReachable: (r: boolean) => (reachable = r) };
}

function setup() {
  const clock = new FakeClock(0);
  const tower = towerApprovals();
  const waits = new ApprovalWaits({ api: tower.api, clock, log: silentLogger(), pollMs: 15_000 });
  const outcome = (id: string, timeoutMs = 600_000, signal = new AbortController().signal) => {
    const box: { d: ApprovalDecision | null } = { d: null };
    void waits.wait(id, timeoutMs, signal).then((d) => {
      box.d = d;
    });
    return box;
  };
  return { clock, tower, waits, outcome };
}

describe('waiting for approval decisions', () => {
  it('takes the decision from approval_decided at once, and stops polling', async () => {
    const { clock, tower, waits, outcome } = setup();
    tower.add('apr_1');
    const box = outcome('apr_1');
    waits.decided('apr_1', 'approved', 'go');
    await clock.advance(0);
    expect(box.d).toEqual({ status: 'approved', reason: 'go', by: 'operator' });
    expect(waits.size).toBe(0);
    expect(clock.pending()).toBe(0);
  });

  it('learns a decision it was not told about by polling, and at once on reconnect', async () => {
    const { clock, tower, waits, outcome } = setup();
    const a = tower.add('apr_2');
    const box = outcome('apr_2');
    await clock.advance(15_000);
    expect(box.d).toBeNull();
    a.status = 'approved';
    await clock.advance(14_999);
    expect(box.d).toBeNull();
    await clock.advance(1);
    expect(box.d).toEqual({ status: 'approved', reason: null, by: 'operator' });

    const b = tower.add('apr_3');
    const box3 = outcome('apr_3');
    b.status = 'rejected';
    b.reason = 'no';
    waits.pollAll();
    await clock.advance(0);
    expect(box3.d).toEqual({ status: 'rejected', reason: 'no', by: 'operator' });
  });

  it('rejects on the tower when nobody answers within the timeout, with the reason', async () => {
    const { clock, tower, outcome } = setup();
    tower.add('apr_4');
    const box = outcome('apr_4', 600_000);
    await clock.advance(599_999);
    expect(box.d).toBeNull();
    await clock.advance(1);
    expect(box.d).toEqual({ status: 'rejected', reason: 'no answer within 10m', by: 'timeout' });
    expect(tower.rows.get('apr_4')).toMatchObject({ status: 'rejected', reason: 'no answer within 10m' });
  });

  it("counts the tower's echo of its own timeout rejection as the timeout", async () => {
    const { clock, tower, waits, outcome } = setup();
    tower.add('apr_5');
    const box = outcome('apr_5', 1000);
    await clock.advance(1000);
    // The control message can beat the HTTP answer.
    waits.decided('apr_5', 'rejected', 'no answer within 1s');
    await clock.advance(0);
    expect(box.d?.by).toBe('timeout');
  });

  it('keeps an operator decision that won the race against the timeout', async () => {
    const { clock, tower, outcome } = setup();
    const a = tower.add('apr_6');
    const box = outcome('apr_6', 1000);
    a.status = 'approved';
    await clock.advance(1000);
    expect(box.d).toEqual({ status: 'approved', reason: null, by: 'operator' });
  });

  it('rejects locally when the tower cannot be reached at the timeout', async () => {
    const { clock, tower, outcome } = setup();
    tower.add('apr_7');
    tower.setReachable(false);
    const box = outcome('apr_7', 1000);
    await clock.advance(1000);
    expect(box.d).toEqual({ status: 'rejected', reason: 'no answer within 1s', by: 'timeout' });
  });

  it('ends the wait when the run ends, and says so on the tower', async () => {
    const { clock, tower, outcome } = setup();
    tower.add('apr_8');
    const stop = new AbortController();
    const box = outcome('apr_8', 600_000, stop.signal);
    stop.abort();
    await clock.advance(0);
    expect(box.d).toEqual({ status: 'rejected', reason: 'the run ended before a decision', by: 'ended' });
    expect(tower.calls).toContain('reject apr_8 the run ended before a decision');
    expect(clock.pending()).toBe(0);
  });
});
