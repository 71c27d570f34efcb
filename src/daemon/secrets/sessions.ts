// Secrets-broker sessions: a 256-bit random id per agent run, mapped to the agent's id, held
// only in memory. Whoever starts an agent mints one (ctx.secrets.mint) and revokes it when
// the agent exits; a restart of svcd forgets them all, as its agents are restarted too.
import { randomToken } from '../../lib/ids.js';

/**
 * A secrets-broker session, minted per agent run (docs/secrets.md). Add `env` to
 * the agent's environment; call revoke() when the agent exits, after which its requests on
 * secrets.sock are refused with unknown_session.
 */
export interface SecretSession {
  /** 256 bits of randomness, base64url. */
  readonly id: string;
  readonly agentId: string;
  /** secrets.sock, as the agent sees it in SVC_SECRETS_SOCKET. */
  readonly socketPath: string;
  readonly env: { SVC_SECRETS_SOCKET: string; SVC_SECRETS_SESSION: string };
  /** Ends the session: secrets.sock refuses it from now on. Idempotent. */
  revoke(): void;
}

export interface SecretSessions {
  mint(agentId: string): SecretSession;
  /** The agent a live session belongs to, or null. */
  resolve(sessionId: string): string | null;
}

export class SessionRegistry implements SecretSessions {
  private readonly agents = new Map<string, string>();

  constructor(private readonly socketPath: string) {}

  mint(agentId: string): SecretSession {
    if (agentId.length === 0) throw new Error('a secrets session needs an agent id');
    const id = randomToken(32);
    this.agents.set(id, agentId);
    const agents = this.agents;
    return {
      id,
      agentId,
      socketPath: this.socketPath,
      env: { SVC_SECRETS_SOCKET: this.socketPath, SVC_SECRETS_SESSION: id },
      revoke() {
        agents.delete(id);
      },
    };
  }

  resolve(sessionId: string): string | null {
    return this.agents.get(sessionId) ?? null;
  }

  /** Number of live sessions (for daemon.status). */
  get size(): number {
    return this.agents.size;
  }
}
