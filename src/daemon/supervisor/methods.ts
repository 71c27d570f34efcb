// mgmt.sock methods of the supervisor (docs/agents.md): agent.list|status|start|stop|restart|
// signal|pause|resume, and agent.reload (re-read agents.toml and config.toml). A table that
// daemon.ts registers; the supervisor itself knows nothing of mgmt.sock.
import { AgentRef, AgentSignalParams } from '../../protocol/agents.js';
import { Empty } from '../../protocol/common.js';
import { type MgmtMethod, method } from '../mgmt/method.js';
import type { Supervisor } from './supervisor.js';

export function agentMethods(s: Supervisor): MgmtMethod[] {
  const byId = (fn: (id: string) => Promise<unknown>) => async (params: unknown) =>
    fn((params as AgentRef).id);
  return [
    method('agent.list', async () => ({ items: s.listAgents() }), Empty),
    method(
      'agent.status',
      byId((id) => s.agentStatus(id)),
      AgentRef,
    ),
    method(
      'agent.start',
      byId((id) => s.startAgent(id)),
      AgentRef,
    ),
    method(
      'agent.stop',
      byId((id) => s.stopAgent(id)),
      AgentRef,
    ),
    method(
      'agent.restart',
      byId((id) => s.restartAgent(id)),
      AgentRef,
    ),
    method(
      'agent.pause',
      byId((id) => s.pauseAgent(id)),
      AgentRef,
    ),
    method(
      'agent.resume',
      byId((id) => s.resumeAgent(id)),
      AgentRef,
    ),
    method('agent.reload', async () => s.reload(), Empty),
    method(
      'agent.signal',
      async (params) => {
        const p = params as AgentSignalParams;
        return s.signal(p.target, p.prompt, p.wait ? { wait: true } : {});
      },
      AgentSignalParams,
    ),
  ];
}
