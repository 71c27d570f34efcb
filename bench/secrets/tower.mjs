// bench/secrets child: a tower (SQLite) with one domain, one node, one granted secret. Agent
// enrolment is injected (agent agt_bench on the node). Prints one JSON line when ready.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../dist/lib/log.js';
import { createTower } from '../../dist/tower/tower.js';

const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-secrets-'));
let nodeId = '';
const tower = await createTower({
  dataDir,
  log: silentLogger(),
  rateLimit: { limit: 0, windowMs: 60_000 },
  agentLookup: async (_db, id) => (id === 'agt_bench' ? { id, node_id: nodeId, domain_id: domainId } : null),
});
let domainId = '';
const { readFileSync } = await import('node:fs');
const admin = readFileSync(join(dataDir, 'admin.token'), 'utf8').trim();
const call = async (method, url, payload) => {
  const r = await tower.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    payload: JSON.stringify(payload),
  });
  return JSON.parse(r.body);
};
domainId = (await call('POST', '/domains', { name: 'bench' })).id;
const node = await call('POST', '/nodes', { hostname: 'bench-node' });
nodeId = node.id;
await call('PUT', `/secrets/BENCH_TOKEN?domain_id=${domainId}`, { value: 'x'.repeat(64) });
await call('POST', `/secrets/BENCH_TOKEN/grants?domain_id=${domainId}`, { agent_id: 'agt_bench' });
const url = await tower.listen('127.0.0.1', 0);
process.stdout.write(`${JSON.stringify({ url, jwt: node.jwt, nodeId })}\n`);
process.on('SIGTERM', () => void tower.stop().then(() => process.exit(0)));
