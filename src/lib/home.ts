// Where svc keeps its files. Resolved once from the environment at the CLI edge and then
// passed down; nothing else reads SVC_HOME.
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface SvcPaths {
  home: string;
  towerDir: string;
  svcdDir: string;
  credentialsFile: string;
}

export function resolvePaths(env: NodeJS.ProcessEnv): SvcPaths {
  const home = env.SVC_HOME && env.SVC_HOME.length > 0 ? env.SVC_HOME : join(homedir(), '.svc');
  return {
    home,
    towerDir: join(home, 'tower'),
    svcdDir: join(home, 'svcd'),
    credentialsFile: join(home, 'credentials.json'),
  };
}
