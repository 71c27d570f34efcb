// bench/queue's HTTP claimers, in a process of their own (the tower's event loop serves
// requests only, as it would with remote workers): C loops of claim → complete through
// POST /mcp/call with a node JWT until the queue is empty. Input: one JSON argument
// { url, jwt, agents, mission, batch } (batch 0: one task per call); output: one JSON line
// { done, ids, secs, lat, cpuMs } on stdout (ids: the task of every claim, once per claim, for
// the count checks; lat: every claim's latency in ms; cpuMs: this process's CPU).
import http from 'node:http';
import { performance } from 'node:perf_hooks';

const { url, jwt, agents, mission, batch } = JSON.parse(process.argv[2]);

// node:http with a keep-alive agent, one socket per claimer: several times less client CPU
// per request than fetch (undici), and the client shares the machine's cores with the tower.
const agent = new http.Agent({ keepAlive: true, maxSockets: agents.length });
const target = new URL('/mcp/call', url);

function mcp(tool, args) {
  const body = JSON.stringify({ tool, args });
  return new Promise((resolve, reject) => {
    const req = http.request(
      target,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${jwt}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          if (res.statusCode !== 200)
            reject(new Error(`${tool}: ${res.statusCode} ${JSON.stringify(parsed)}`));
          else resolve(parsed.result);
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const lat = [];
const ids = [];
let done = 0;
const cpu0 = process.cpuUsage();
const t0 = performance.now();
// To the last completion (BENCHMARKING.md), not to each claimer's last, empty claim.
let last = t0;
await Promise.all(
  agents.map(async (agent) => {
    for (;;) {
      const s = performance.now();
      if (batch > 0) {
        // The batch claimed in one call is completed in one call (complete_mesh_tasks).
        const r = await mcp('claim_mesh_tasks', { agent_id: agent, mission_id: mission, max: batch });
        lat.push(performance.now() - s);
        if (r.items.length === 0) return;
        for (const x of r.items) ids.push(x.task.id);
        const c = await mcp('complete_mesh_tasks', {
          items: r.items.map((x) => ({ task_id: x.task.id, lease_id: x.lease_id })),
        });
        if (!c.items.every((x) => x.ok)) throw new Error('a completion failed');
        done += r.items.length;
        last = performance.now();
      } else {
        const c = await mcp('claim_mesh_task', { agent_id: agent, mission_id: mission });
        lat.push(performance.now() - s);
        if (!c) return;
        ids.push(c.task.id);
        await mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
        done++;
        last = performance.now();
      }
    }
  }),
);
const secs = (last - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
const cpuMs = (cpu.user + cpu.system) / 1000;
process.stdout.write(`${JSON.stringify({ done, ids, secs, lat, cpuMs })}\n`);
