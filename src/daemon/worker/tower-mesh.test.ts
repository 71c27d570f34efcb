import { describe, expect, it } from 'vitest';
import { SvcError } from '../../protocol/errors.js';
import type { TowerApi } from '../tower-client/api.js';
import { isLeaseLost } from './mesh-api.js';
import { createTowerMesh } from './tower-mesh.js';

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
  it('reads where a task stands with get_mesh_task, keeping only what the worker compares', async () => {
    const task = { id: 'mt_1', state: 'completed', attempt: 2, claimed_by: 'ag_1', title: 't', result: {} };
    const { tower, calls } = recordingTower(() => ({ result: task }));
    expect(await createTowerMesh(tower).state('mt_1')).toEqual({
      state: 'completed',
      attempt: 2,
      claimed_by: 'ag_1',
    });
    expect(calls).toEqual([
      { method: 'POST', path: '/mcp/call', body: { tool: 'get_mesh_task', args: { task_id: 'mt_1' } } },
    ]);
  });

  it('calls the MCP tools with the lease, clipping long progress and failure text', async () => {
    const mission = { repository: null, agent_policy: null };
    const { tower, calls } = recordingTower((_m, _p, body) => ({
      result: (body as { tool: string }).tool === 'start_mesh_task' ? { id: 'mt_1', mission } : null,
    }));
    const mesh = createTowerMesh(tower);
    expect(await mesh.claim('ag_1')).toBeNull();
    expect(await mesh.start('mt_1', 'ls_1')).toEqual(mission);
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

  it("takes the mission's repository and policy from the start answer, asking nothing else", async () => {
    const policy = { rules: [{ kind: ['fetch'], action: 'deny' }] };
    const mission = { repository: '/srv/repo', agent_policy: policy };
    const { tower, calls } = recordingTower(() => ({ result: { id: 'mt_1', state: 'running', mission } }));
    const mesh = createTowerMesh(tower);
    expect(await mesh.start('mt_1', 'ls_1')).toEqual(mission);
    expect(calls.map((c) => `${c.method} ${c.path} ${(c.body as { tool: string }).tool}`)).toEqual([
      'POST /mcp/call start_mesh_task',
    ]);
  });

  it('does not run a task when the tower sends no mission settings (an older tower)', async () => {
    const { tower } = recordingTower(() => ({ result: { id: 'mt_1', state: 'running' } }));
    await expect(createTowerMesh(tower).start('mt_1', 'ls_1')).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('tells a lost lease from a transient error', () => {
    expect(isLeaseLost(new SvcError('stale_lease', 'x'))).toBe(true);
    expect(isLeaseLost(new SvcError('illegal_transition', 'x'))).toBe(true);
    expect(isLeaseLost(new SvcError('tower_unreachable', 'x'))).toBe(false);
    expect(isLeaseLost(new Error('boom'))).toBe(false);
  });
});
