// Secrets sessions (DESIGN §4 Secrets broker): every agent process gets SVC_SECRETS_SOCKET
// and SVC_SECRETS_SESSION, minted per run and revoked when the run ends. The broker
// (secrets/) implements SecretSessions; runtimes and the supervisor only consume it.
import { randomToken } from '../../lib/ids.js';

export interface SecretSession {
  id: string;
  socketPath: string;
  /** Ends the session: the broker refuses it from now on. Idempotent. */
  revoke(): void;
}

export interface SecretSessions {
  mint(agentId: string): SecretSession;
}

/** Environment variables carrying a session into an agent process. */
export function sessionEnv(s: SecretSession): Record<string, string> {
  return { SVC_SECRETS_SOCKET: s.socketPath, SVC_SECRETS_SESSION: s.id };
}

/**
 * A stand-in for the broker (tests, and svcd until secrets/ is wired): mints well-formed,
 * random session ids that no broker will honour, and remembers which are live.
 */
export function standInSessions(socketPath: string): SecretSessions & { live(): string[] } {
  const live = new Map<string, string>();
  return {
    mint(agentId) {
      const id = randomToken(32);
      live.set(id, agentId);
      return { id, socketPath, revoke: () => live.delete(id) };
    },
    live: () => [...live.keys()],
  };
}
