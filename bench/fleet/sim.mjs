// A simulated fleet for bench/fleet: N node control channels in one process, speaking the
// control protocol exactly as svcd does (src/protocol/control.ts, decoded with the same
// schemas and checker as svcd's tower-client): hello with an attach secret and the node's
// agents, agent_status, node.response to every node.request, attach dial-back echoing the
// viewer's bytes, and, on worker nodes, claim and complete over POST /mcp/call on each
// task_ready and on a poll. Reconnects with svcd's backoff (1 s doubling to 30 s, jittered),
// honouring a 503's Retry-After. Everything a figure counts is counted here.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { Backoff } from '../../dist/lib/backoff.js';
import { NODE_ATTACH_PREFIX } from '../../dist/protocol/attach.js';
import { checkAttachOpen } from '../../dist/protocol/attach-signature.js';
import { compileCheck } from '../../dist/protocol/check.js';
import { CONTROL_PATH, controlDecoder, TOWER_TO_NODE } from '../../dist/protocol/control.js';

const decode = controlDecoder(TOWER_TO_NODE, (schema) => {
  const check = compileCheck(schema);
  return (v) => {
    const f = check(v);
    return f === null ? null : `${f.path || 'message'} ${f.message}`;
  };
});

/**
 * nodes: [{ id, jwt, agentId? }] (agentId: a worker, which claims mesh tasks of `missionId`).
 * url: where nodes dial (the load balancer). pollMs: a worker's claim poll (the backstop).
 */
export function createFleet({ url, nodes, missionId, pollMs = 2000 }) {
  const ws = url.replace(/^http/, 'ws');
  const stats = {
    /** Welcomes received (one per successful connection). */
    welcomes: 0,
    /** Connection attempts that failed before a welcome (refused, reset, 503). */
    failedAttempts: 0,
    refused503: 0,
    invalidMessages: 0,
    nodeRequests: 0,
    attachOpens: 0,
    attachBadSignature: 0,
    attachDialBackFailed: 0,
    taskReady: 0,
    /**
     * claim_mesh_task calls; per task id, the calls its task_ready caused (the first, the
     * claims a busy worker made again for it, and the claimer's next call, which finds the
     * queue empty); calls of poll rounds no task_ready reached.
     */
    claimCalls: 0,
    claimCallsByTask: new Map(),
    pollClaimCalls: 0,
    claimErrors: 0,
    /** task id → performance.now() of the claim answer that carried it. */
    claimedAt: new Map(),
    /** task id → complete_mesh_task answers with 200 (must be 1). */
    completions: new Map(),
    completeErrors: 0,
  };
  const sims = nodes.map((n) => ({
    ...n,
    secret: randomBytes(32).toString('hex'),
    socket: null,
    welcomed: false,
    /** performance.now() of the last welcome. */
    welcomedAt: 0,
    connects: 0,
    backoff: new Backoff(),
    retry: null,
    busy: false,
    again: false,
    /** The task whose task_ready the current (or next) round of claims answers. */
    cause: null,
    poll: null,
  }));
  let stopped = false;
  const waiters = new Set();
  const settle = () => {
    for (const w of waiters) w();
  };

  async function mcp(sim, tool, args) {
    const res = await fetch(`${url}/mcp/call`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sim.jwt}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tool, args }),
    });
    const body = await res.json();
    return { status: res.status, body };
  }

  /**
   * Claims (and completes) until the queue is empty, as svcd's claim loop does; `trigger` is
   * the task_ready's task id (null: the poll). A wake-up while claiming makes one more round.
   * Every call is counted against the task whose task_ready caused it, or as a poll call.
   */
  async function work(sim, trigger) {
    if (!sim.agentId || stopped) return;
    if (trigger) sim.cause = trigger;
    if (sim.busy) {
      sim.again = true;
      return;
    }
    sim.busy = true;
    try {
      for (;;) {
        sim.again = false;
        stats.claimCalls++;
        const cause = sim.cause;
        if (cause) stats.claimCallsByTask.set(cause, (stats.claimCallsByTask.get(cause) ?? 0) + 1);
        else stats.pollClaimCalls++;
        let claim;
        try {
          const r = await mcp(sim, 'claim_mesh_task', { agent_id: sim.agentId, mission_id: missionId() });
          if (r.status !== 200) {
            stats.claimErrors++;
            break;
          }
          claim = r.body.result;
        } catch {
          stats.claimErrors++;
          break;
        }
        if (claim) {
          stats.claimedAt.set(claim.task.id, performance.now());
          await complete(sim, claim);
          continue; // there may be more
        }
        if (!sim.again) break;
      }
    } finally {
      sim.busy = false;
      sim.cause = null;
    }
  }

  async function complete(sim, claim) {
    // A network error (a replica killed mid-call) is retried; the lease fences a late one.
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        const r = await mcp(sim, 'complete_mesh_task', {
          task_id: claim.task.id,
          lease_id: claim.lease_id,
          result: { by: sim.id },
        });
        if (r.status === 200) {
          stats.completions.set(claim.task.id, (stats.completions.get(claim.task.id) ?? 0) + 1);
        } else stats.completeErrors++;
        return;
      } catch {
        stats.completeErrors++;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  function schedule(sim, ms) {
    if (stopped || sim.retry) return;
    sim.retry = setTimeout(() => {
      sim.retry = null;
      open(sim);
    }, ms);
  }

  function open(sim) {
    if (stopped) return;
    const s = new WebSocket(`${ws}${CONTROL_PATH}`, {
      headers: { authorization: `Bearer ${sim.jwt}` },
      handshakeTimeout: 10_000,
      perMessageDeflate: false,
    });
    sim.socket = s;
    let retryAfterMs = 0;
    s.on('open', () => {
      const agents = sim.agentId ? [{ agent_id: sim.agentId, status: 'idle' }] : [];
      s.send(JSON.stringify({ type: 'hello', version: 'fleet-sim', attach_secret: sim.secret, agents }));
    });
    s.on('unexpected-response', (_req, res) => {
      if (res.statusCode === 503) {
        stats.refused503++;
        retryAfterMs = Number(res.headers['retry-after'] ?? 0) * 1000;
      }
      s.terminate();
    });
    s.on('message', (data, isBinary) => {
      const d = isBinary ? { ok: false } : decode(String(data));
      if (d.ok === false) {
        stats.invalidMessages++;
        return;
      }
      if (d.ok === 'skip') return;
      const m = d.msg;
      if (m.type === 'welcome') {
        sim.welcomed = true;
        sim.welcomedAt = performance.now();
        sim.connects++;
        stats.welcomes++;
        sim.backoff.reset();
        if (sim.agentId) {
          s.send(JSON.stringify({ type: 'agent_status', agent_id: sim.agentId, status: 'idle' }));
          if (!sim.poll) {
            // Staggered so the fleet's polls do not come in waves.
            sim.poll = setInterval(() => void work(sim, null), pollMs * (0.75 + Math.random() / 2));
          }
        }
        settle();
      } else if (m.type === 'task_ready') {
        stats.taskReady++;
        void work(sim, m.task_id);
      } else if (m.type === 'node.request') {
        stats.nodeRequests++;
        const result = m.method === 'node.status' ? { agents: [], cron: [] } : { ok: true };
        s.send(JSON.stringify({ type: 'node.response', request_id: m.request_id, result }));
      } else if (m.type === 'attach.open') {
        stats.attachOpens++;
        dialBack(sim, m);
      }
    });
    s.on('error', () => {});
    s.on('close', () => {
      if (sim.socket === s) sim.socket = null;
      if (!sim.welcomed) stats.failedAttempts++;
      sim.welcomed = false;
      if (stopped) return;
      settle();
      schedule(sim, Math.max(retryAfterMs, sim.backoff.next()));
    });
  }

  function dialBack(sim, m) {
    if (checkAttachOpen(sim.secret, m, Date.now()) !== null) {
      stats.attachBadSignature++;
      return;
    }
    const s = new WebSocket(`${ws}${NODE_ATTACH_PREFIX}${m.stream_id}`, {
      headers: { authorization: `Bearer ${sim.jwt}` },
      perMessageDeflate: false,
    });
    let opened = false;
    s.on('open', () => {
      opened = true;
    });
    s.on('message', (data, isBinary) => {
      if (isBinary) s.send(data, { binary: true });
    });
    s.on('error', () => {});
    s.on('close', () => {
      if (!opened) stats.attachDialBackFailed++;
    });
  }

  return {
    stats,
    sims,
    /** Opens every node's channel at once. */
    connectAll() {
      for (const sim of sims) open(sim);
    },
    connected() {
      let n = 0;
      for (const sim of sims) if (sim.welcomed) n++;
      return n;
    },
    /** Resolves once `pred()` holds (checked on every welcome and close), or rejects at the deadline. */
    until(what, pred, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!pred()) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`fleet: timed out waiting for ${what}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    /** The local port of each node's channel (HAProxy's `show sess` names it as src). */
    localPorts() {
      const out = new Map();
      for (const sim of sims) {
        const port = sim.socket?._socket?.localPort;
        if (sim.welcomed && port) out.set(port, sim);
      }
      return out;
    },
    async close() {
      stopped = true;
      for (const sim of sims) {
        clearTimeout(sim.retry);
        clearInterval(sim.poll);
        sim.socket?.terminate();
        sim.welcomed = false;
      }
      settle();
    },
  };
}
