import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../lib/clock.js';
import { SvcError } from '../../protocol/errors.js';
import type { TowerApi } from '../tower-client/api.js';
import { isLeaseLost } from './mesh-api.js';
import { createTowerMesh, MISSION_TTL_MS } from './tower-mesh.js';

function recordingTower(answer: (method: string, path: string, body: unknown) => unknown) {
  const calls: { method: string; path: string; body: unknown }[] = [];
  const tower: TowerApi = {
    baseUrl: 'http://tower.test',
    request: async <T>(method: string, path: string, body?: unknown) => {
      calls.push({ method, path, body });
      return answer(method, path, body) as T;
    },
  };
  return { tower, calls };
}

describe('tower mesh adapter', () => {
  it('calls the MCP tools with the lease, clipping long progress and failure text', async () => {
    const { tower, calls } = recordingTower(() => ({ result: null }));
    const mesh = createTowerMesh(tower);
    expect(await mesh.claim('ag_1')).toBeNull();
    await mesh.start('mt_1', 'ls_1');
    await mesh.progress('mt_1', 'ls_1', { message: 'x'.repeat(20_000), data: { kind: 'message' } });
    await mesh.fail('mt_1', 'ls_1', 'y'.repeat(20_000));
    expect(calls.map((c) => (c.body as { tool: string }).tool)).toEqual([
      'claim_mesh_task',
      'start_mesh_task',
      'report_progress',
      'fail_mesh_task',
    ]);
    expect(calls[0]?.body).toEqual({ tool: 'claim_mesh_task', args: { agent_id: 'ag_1' } });
    const progress = (calls[2]!.body as { args: { message: string; lease_id: string } }).args;
    expect(progress.message.length).toBe(10_000);
    expect(progress.lease_id).toBe('ls_1');
    expect((calls[3]!.body as { args: { reason: string } }).args.reason.length).toBe(10_000);
  });

  it('keeps a mission for MISSION_TTL_MS, and looks again after a failed lookup', async () => {
    let fail = true;
    const policy = { rules: [{ kind: ['fetch'], action: 'deny' }] };
    const { tower, calls } = recordingTower(() => {
      if (fail) throw new SvcError('tower_unreachable', 'down');
      return { id: 'mis_1', repository: '/srv/repo', agent_policy: policy };
    });
    const clock = new FakeClock(0);
    const mesh = createTowerMesh(tower, clock);
    await expect(mesh.mission('dom_1', 'mis_1')).rejects.toMatchObject({ code: 'tower_unreachable' });
    fail = false;
    const want = { repository: '/srv/repo', agent_policy: policy };
    expect(await mesh.mission('dom_1', 'mis_1')).toEqual(want);
    await clock.advance(MISSION_TTL_MS - 1);
    expect(await mesh.mission('dom_1', 'mis_1')).toEqual(want);
    await clock.advance(1);
    expect(await mesh.mission('dom_1', 'mis_1')).toEqual(want);
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      'GET /domains/dom_1/m/mis_1',
      'GET /domains/dom_1/m/mis_1',
      'GET /domains/dom_1/m/mis_1',
    ]);
  });

  it('tells a lost lease from a transient error', () => {
    expect(isLeaseLost(new SvcError('stale_lease', 'x'))).toBe(true);
    expect(isLeaseLost(new SvcError('illegal_transition', 'x'))).toBe(true);
    expect(isLeaseLost(new SvcError('tower_unreachable', 'x'))).toBe(false);
    expect(isLeaseLost(new Error('boom'))).toBe(false);
  });
});
