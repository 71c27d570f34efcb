// `svc agent node register`: registers this machine with the tower and writes the node
// identity file (0600) that svcd reads at start.
import { hostname as osHostname } from 'node:os';
import type { Command } from 'commander';
import { nodeFileForWrite, writeNodeIdentity } from '../../daemon/identity.js';
import type { NodeRegistered } from '../../protocol/nodes.js';
import { type CommandDeps, globals } from '../deps.js';
import { keyValues, print } from '../output.js';
import { registerNodeList } from './task.js';

export function registerNodeCommands(agent: Command, deps: CommandDeps): void {
  const node = agent.command('node').description('this machine as a node of the tower');
  node
    .command('register')
    .description('register this node with the tower and write its identity file (JWT)')
    .option('--hostname <hostname>', 'name of this node', osHostname())
    .option('--force', 're-register an existing hostname: rotates its JWT (the old one stops working)')
    .action(async (o: { hostname: string; force?: boolean }, cmd: Command) => {
      const client = await deps.client(cmd);
      const res = await client.post<NodeRegistered>('/nodes', {
        hostname: o.hostname,
        ...(o.force ? { force: true } : {}),
      });
      const file = nodeFileForWrite(deps.io.env, deps.io.paths.home);
      await writeNodeIdentity(file, {
        node_id: res.id,
        hostname: res.hostname,
        backend_url: client.url,
        jwt: res.jwt,
      });
      const shown = { node_id: res.id, hostname: res.hostname, backend_url: client.url, identity_file: file };
      print(deps.io, Boolean(globals(cmd).json), shown, () => `${keyValues(shown)}\n\nnext: svc daemon up`);
    });
  registerNodeList(node, deps);
}
