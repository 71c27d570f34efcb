// `svc daemon …`: the local svcd, over mgmt.sock.
import type { Command } from 'commander';
import { daemonPaths } from '../../daemon/paths.js';
import { type CommandDeps, globals } from '../deps.js';
import { mgmtCall } from '../mgmt-client.js';
import { keyValues, print } from '../output.js';

export function registerDaemonCommands(daemon: Command, deps: CommandDeps): void {
  daemon
    .command('status')
    .description("the local svcd's version, uptime, tower connectivity and components")
    .action(async (_o, cmd: Command) => {
      const paths = daemonPaths(deps.io.paths.home);
      const status = await mgmtCall<Record<string, unknown>>(paths.mgmtSock, 'daemon.status');
      print(deps.io, Boolean(globals(cmd).json), status, () => keyValues(status));
    });
}
