import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chooseWake, FIRST_CLAIM_WAKES, type WakeCandidate, type WakeTask } from './wake.js';

const agent = (
  agentId: string,
  nodeId: string,
  status = 'idle',
  capabilities: string[] = [],
): WakeCandidate => ({ agentId, nodeId, status, capabilities });
const firstClaim = (required: string[] = []): WakeTask => ({
  assigned_agent_id: null,
  required_capabilities: required,
});

describe('chooseWake', () => {
  it.each([
    {
      name: 'wakes two idle nodes of a first_claim task, in agent-id order',
      task: firstClaim(),
      candidates: [agent('a3', 'n3'), agent('a1', 'n1'), agent('a2', 'n2')],
      after: null,
      want: { nodes: ['n1', 'n2'], after: 'a2' },
    },
    {
      name: 'starts after the cursor and wraps around',
      task: firstClaim(),
      candidates: [agent('a1', 'n1'), agent('a2', 'n2'), agent('a3', 'n3')],
      after: 'a2',
      want: { nodes: ['n3', 'n1'], after: 'a1' },
    },
    {
      name: 'starts at the next id when the cursor agent is gone',
      task: firstClaim(),
      candidates: [agent('a1', 'n1'), agent('a4', 'n4'), agent('a5', 'n5')],
      after: 'a2',
      want: { nodes: ['n4', 'n5'], after: 'a5' },
    },
    {
      name: 'never wakes an agent without the required capabilities',
      task: firstClaim(['gpu']),
      candidates: [agent('a1', 'n1'), agent('a2', 'n2', 'idle', ['gpu', 'x']), agent('a3', 'n3')],
      after: null,
      want: { nodes: ['n2'], after: 'a2' },
    },
    {
      name: 'prefers idle agents to busy ones',
      task: firstClaim(),
      candidates: [agent('a1', 'n1', 'busy'), agent('a2', 'n2', 'idle'), agent('a3', 'n3', 'busy')],
      after: null,
      want: { nodes: ['n2'], after: 'a2' },
    },
    {
      name: 'wakes busy agents when none is idle (a busy worker may have a free slot)',
      task: firstClaim(),
      candidates: [agent('a1', 'n1', 'busy'), agent('a2', 'n2', 'errored'), agent('a3', 'n3', 'busy')],
      after: null,
      want: { nodes: ['n1', 'n3'], after: 'a3' },
    },
    {
      name: 'counts online as idle',
      task: firstClaim(),
      candidates: [agent('a1', 'n1', 'busy'), agent('a2', 'n2', 'online')],
      after: null,
      want: { nodes: ['n2'], after: 'a2' },
    },
    {
      name: 'wakes distinct nodes when one node runs several candidates',
      task: firstClaim(),
      candidates: [agent('a1', 'n1'), agent('a2', 'n1'), agent('a3', 'n2')],
      after: null,
      want: { nodes: ['n1', 'n2'], after: 'a3' },
    },
    {
      name: 'falls back (null) when no candidate can claim a first_claim task',
      task: firstClaim(['gpu']),
      candidates: [
        agent('a1', 'n1'),
        agent('a2', 'n2', 'offline', ['gpu']),
        agent('a3', 'n3', 'errored', ['gpu']),
      ],
      after: 'a1',
      want: null,
    },
    {
      name: "wakes only the assigned agent's node, busy or idle, and keeps the cursor",
      task: { assigned_agent_id: 'a2', required_capabilities: [] },
      candidates: [agent('a1', 'n1'), agent('a2', 'n2', 'busy'), agent('a3', 'n3')],
      after: 'a1',
      want: { nodes: ['n2'], after: 'a1' },
    },
    {
      name: 'falls back (null) for an assigned task whose agent is not a candidate',
      task: { assigned_agent_id: 'a9', required_capabilities: [] },
      candidates: [agent('a1', 'n1')],
      after: null,
      want: null,
    },
    {
      name: 'falls back (null) for an assigned task whose agent is offline',
      task: { assigned_agent_id: 'a1', required_capabilities: [] },
      candidates: [agent('a1', 'n1', 'offline')],
      after: null,
      want: null,
    },
  ])('$name', ({ task, candidates, after, want }) => {
    expect(chooseWake(task, candidates, after)).toEqual(want);
  });

  const statusArb = fc.constantFrom('idle', 'online', 'busy', 'errored', 'offline');
  const capsArb = fc.subarray(['gpu', 'arm', 'big']);
  const candidatesArb = fc
    .uniqueArray(
      fc.record({
        agentId: fc.integer({ min: 0, max: 99 }).map((i) => `a${String(i).padStart(2, '0')}`),
        nodeId: fc.integer({ min: 0, max: 9 }).map((i) => `n${i}`),
        status: statusArb,
        capabilities: capsArb,
      }),
      { selector: (c) => c.agentId, maxLength: 30 },
    )
    .map((cs) => cs as WakeCandidate[]);

  it('wakes at most FIRST_CLAIM_WAKES distinct nodes, each with a capable agent, idle ones when there are', () => {
    fc.assert(
      fc.property(candidatesArb, capsArb, fc.option(fc.string({ maxLength: 3 })), (cs, required, after) => {
        const got = chooseWake(firstClaim(required), cs, after);
        const capable = cs.filter(
          (c) =>
            ['idle', 'online', 'busy'].includes(c.status) &&
            required.every((r) => c.capabilities.includes(r)),
        );
        if (capable.length === 0) {
          expect(got).toBeNull();
          return;
        }
        if (got === null) throw new Error('a capable candidate exists');
        expect(got.nodes.length).toBeGreaterThan(0);
        expect(got.nodes.length).toBeLessThanOrEqual(FIRST_CLAIM_WAKES);
        expect(new Set(got.nodes).size).toBe(got.nodes.length);
        const idle = capable.filter((c) => c.status === 'idle' || c.status === 'online');
        const pool = idle.length > 0 ? idle : capable;
        for (const n of got.nodes) expect(pool.some((c) => c.nodeId === n)).toBe(true);
        // As many as there are, up to the limit.
        expect(got.nodes.length).toBe(Math.min(FIRST_CLAIM_WAKES, new Set(pool.map((c) => c.nodeId)).size));
      }),
    );
  });

  it('wakes exactly the assigned agent’s node, or falls back when it cannot be woken', () => {
    fc.assert(
      fc.property(candidatesArb, fc.nat(40), (cs, pick) => {
        const target = cs[pick % Math.max(1, cs.length)];
        const id = target?.agentId ?? 'a-none';
        const got = chooseWake({ assigned_agent_id: id, required_capabilities: [] }, cs, null);
        if (target && ['idle', 'online', 'busy'].includes(target.status)) {
          expect(got).toEqual({ nodes: [target.nodeId], after: null });
        } else expect(got).toBeNull();
      }),
    );
  });

  it('over many tasks wakes each idle candidate about equally (counts differ by at most one)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 500 }), (n, tasks) => {
        const cs = Array.from({ length: n }, (_, i) => agent(`a${String(i).padStart(3, '0')}`, `n${i}`));
        const woken = new Map<string, number>();
        let after: string | null = null;
        for (let t = 0; t < tasks; t++) {
          const got = chooseWake(firstClaim(), cs, after);
          if (got === null) throw new Error('idle candidates exist');
          after = got.after;
          for (const node of got.nodes) woken.set(node, (woken.get(node) ?? 0) + 1);
        }
        const counts = cs.map((c) => woken.get(c.nodeId) ?? 0);
        expect(counts.reduce((a, b) => a + b, 0)).toBe(tasks * Math.min(n, FIRST_CLAIM_WAKES));
        expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
      }),
    );
  });
});
