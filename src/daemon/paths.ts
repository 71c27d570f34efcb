// Where svcd keeps its sockets, state and config under $SVC_HOME (docs/configuration.md).
import { join } from 'node:path';

export interface DaemonPaths {
  /** $SVC_HOME */
  home: string;
  /** $SVC_HOME/svcd (0700) */
  svcdDir: string;
  mgmtSock: string;
  secretsSock: string;
  svcdSock: string;
  stateDb: string;
  configToml: string;
  agentsToml: string;
  cronToml: string;
  /** Rotating agent output logs. */
  logsDir: string;
  /** $SVC_HOME/work: per-task working directories. */
  workDir: string;
}

export function daemonPaths(home: string): DaemonPaths {
  const svcdDir = join(home, 'svcd');
  return {
    home,
    svcdDir,
    mgmtSock: join(svcdDir, 'mgmt.sock'),
    secretsSock: join(svcdDir, 'secrets.sock'),
    svcdSock: join(svcdDir, 'svcd.sock'),
    stateDb: join(svcdDir, 'state.db'),
    configToml: join(svcdDir, 'config.toml'),
    agentsToml: join(svcdDir, 'agents.toml'),
    cronToml: join(svcdDir, 'cron.toml'),
    logsDir: join(svcdDir, 'logs'),
    workDir: join(home, 'work'),
  };
}
