// What every svc command receives: IO and a way to reach the tower with the resolved
// credentials (global --url/--token flags, env, credentials.json, local admin token).
import type { Command } from 'commander';
import { TowerClient } from './client.js';
import type { CliIO } from './io.js';
import { resolveCredentials } from './login-store.js';

export interface CommandDeps {
  io: CliIO;
  client(cmd: Command): Promise<TowerClient>;
}

export interface GlobalFlags {
  url?: string;
  token?: string;
  json?: boolean;
}

export function globals(cmd: Command): GlobalFlags {
  return cmd.optsWithGlobals() as GlobalFlags;
}

export function makeDeps(io: CliIO): CommandDeps {
  return {
    io,
    async client(cmd) {
      const g = globals(cmd);
      return new TowerClient(await resolveCredentials(io, { url: g.url, token: g.token }));
    },
  };
}

/** Collects a repeatable option into an array (commander's idiom). */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}
