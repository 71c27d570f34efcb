// Secrets-broker sessions: a 256-bit random id per agent run, mapped to the agent's id, held
// only in memory. Whoever starts an agent mints one (ctx.secrets.mint) and revokes it when
// the agent exits; a restart of svcd forgets them all, as its agents are restarted too.
import { randomToken } from '../../lib/ids.js';
import type { SecretSession, SecretSessions } from '../context.js';

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
