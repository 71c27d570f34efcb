// mgmt.sock methods of the supervisor (docs/agents.md): agent.list|status|start|stop|restart|
// signal|pause|resume, and agent.reload (re-read agents.toml and config.toml).
import { AgentRef, AgentSignalParams } from '../../protocol/agents.js';
import { Empty } from '../../protocol/common.js';
import type { MethodRegistry } from '../context.js';
import type { Supervisor } from './supervisor.js';

export function registerAgentMethods(mgmt: MethodRegistry, s: Supervisor): void {
  const byId = (fn: (id: string) => Promise<unknown>) => async (params: unknown) =>
    fn((params as AgentRef).id);
  mgmt.register('agent.list', async () => ({ items: s.listAgents() }), Empty);
  mgmt.register(
    'agent.status',
    byId((id) => s.agentStatus(id)),
    AgentRef,
  );
  mgmt.register(
    'agent.start',
    byId((id) => s.startAgent(id)),
    AgentRef,
  );
  mgmt.register(
    'agent.stop',
    byId((id) => s.stopAgent(id)),
    AgentRef,
  );
  mgmt.register(
    'agent.restart',
    byId((id) => s.restartAgent(id)),
    AgentRef,
  );
  mgmt.register(
    'agent.pause',
    byId((id) => s.pauseAgent(id)),
    AgentRef,
  );
  mgmt.register(
    'agent.resume',
    byId((id) => s.resumeAgent(id)),
    AgentRef,
  );
  mgmt.register('agent.reload', async () => s.reload(), Empty);
  mgmt.register(
    'agent.signal',
    async (params) => {
      const p = params as AgentSignalParams;
      return s.signal(p.target, p.prompt, p.wait ? { wait: true } : {});
    },
    AgentSignalParams,
  );
}
