// Answers the tower's node.request messages (src/protocol/control.ts) on the control channel:
// each allowed method runs as the mgmt.sock method of the same name, in-process, so the
// console's actions and a local `svc agent restart` take exactly the same path. node.status
// is agent.list + cron.list. Anything else is refused; no request can reach other methods.
import type { Logger } from '../../lib/log.js';
import { NODE_REQUEST_METHODS, type NodeRequest, type NodeResponse } from '../../protocol/control.js';
import { isSvcError } from '../../protocol/errors.js';
import type { ControlChannel } from './control.js';

export type Invoke = (method: string, params: unknown, signal: AbortSignal) => Promise<unknown>;

const ALLOWED = new Set<string>(NODE_REQUEST_METHODS);

/** What one node.request answers: pure routing over `invoke`, testable without sockets. */
export async function answerNodeRequest(
  req: NodeRequest,
  invoke: Invoke,
  signal: AbortSignal,
): Promise<NodeResponse> {
  const base = { type: 'node.response' as const, request_id: req.request_id };
  try {
    if (!ALLOWED.has(req.method)) {
      return {
        ...base,
        error: { code: 'bad_request', message: `unknown node request ${String(req.method)}` },
      };
    }
    if (req.method === 'node.status') {
      const [agents, cron] = await Promise.all([
        invoke('agent.list', {}, signal) as Promise<{ items: unknown[] }>,
        invoke('cron.list', {}, signal),
      ]);
      return { ...base, result: { agents: agents.items, cron } };
    }
    return { ...base, result: await invoke(req.method, req.params, signal) };
  } catch (e) {
    return isSvcError(e)
      ? { ...base, error: { code: e.code, message: e.message } }
      : { ...base, error: { code: 'internal', message: 'the node failed to answer' } };
  }
}

/** Subscribes to node.request on the channel; returns the unsubscribe. */
export function serveNodeRequests(
  control: ControlChannel,
  invoke: Invoke,
  log: Logger,
  signal: AbortSignal,
): () => void {
  return control.on('node.request', (req) => {
    void answerNodeRequest(req, invoke, signal).then((res) => {
      if (res.error?.code === 'internal') log.warn({ method: req.method }, 'node request failed');
      // A channel that dropped meanwhile: the tower already answered node_offline.
      control.send(res);
    });
  });
}
