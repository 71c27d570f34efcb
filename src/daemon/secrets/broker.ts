// The broker's decision for one secrets.sock request: validate it, resolve the session to
// its agent, answer from the cache or fetch from the tower with the node JWT, and turn
// every failure into one of the broker's error codes. No socket code here; no value in any
// message or log line.
import type { Logger } from '../../lib/log.js';
import { isSvcError } from '../../protocol/errors.js';
import type { BrokerErrorCode, BrokerReply, SecretFetched } from '../../protocol/secrets.js';
import { parseBrokerRequest } from '../../protocol/secrets.js';
import type { TowerApi } from '../tower-client/api.js';
import type { SecretCache } from './cache.js';
import type { SecretSessions } from './sessions.js';

export interface BrokerDeps {
  sessions: Pick<SecretSessions, 'resolve'>;
  tower: Pick<TowerApi, 'request'>;
  cache: SecretCache | null;
  log: Logger;
  /** Gives up on the tower after this long (tower_unreachable). */
  fetchTimeoutMs: number;
  /** Starts the fetch timeout; returns a cancel function (the injected clock's setTimeout). */
  setTimeout(fn: () => void, ms: number): { cancel(): void };
}

export type Outcome = 'ok' | BrokerErrorCode;

const fail = (code: BrokerErrorCode, message: string): BrokerReply => ({
  ok: false,
  error: { code, message },
});

/** Answers one decoded request (or a decode failure, passed as `{ error }`). */
export async function answer(deps: BrokerDeps, decoded: unknown): Promise<BrokerReply> {
  const req = parseBrokerRequest(decoded);
  if ('error' in req) return fail('bad_request', req.error);
  const agentId = deps.sessions.resolve(req.session);
  if (agentId === null) {
    return fail(
      'unknown_session',
      'unknown or expired session: SVC_SECRETS_SESSION is valid only while the agent svcd started with it runs',
    );
  }
  const cached = deps.cache?.get(agentId, req.name);
  if (cached != null) return { ok: true, value: cached };
  try {
    const fetched = await withTimeout(deps, () =>
      deps.tower.request<SecretFetched>('POST', `/secrets/${encodeURIComponent(req.name)}/fetch`, {
        agent_id: agentId,
      }),
    );
    deps.cache?.set(agentId, req.name, fetched.value);
    deps.log.debug({ agent_id: agentId, name: req.name, version: fetched.version }, 'secret served');
    return { ok: true, value: fetched.value };
  } catch (e) {
    const reply = replyForError(e, req.name);
    deps.log.debug(
      { agent_id: agentId, name: req.name, code: reply.ok ? null : reply.error.code },
      'secret refused',
    );
    if (!isSvcError(e)) deps.log.error({ err: e }, 'secret fetch failed unexpectedly');
    return reply;
  }
}

function withTimeout<T>(deps: BrokerDeps, fn: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = deps.setTimeout(() => reject(new TowerTimeout()), deps.fetchTimeoutMs);
    fn().then(
      (v) => {
        timer.cancel();
        resolve(v);
      },
      (e: unknown) => {
        timer.cancel();
        reject(e);
      },
    );
  });
}

class TowerTimeout extends Error {}

/** Maps what the tower (or the way to it) said to the broker's codes. */
export function replyForError(e: unknown, name: string): BrokerReply {
  if (e instanceof TowerTimeout)
    return fail('tower_unreachable', 'the tower did not answer in time: retry later');
  if (!isSvcError(e))
    return fail('tower_unreachable', 'the secret could not be fetched (internal error in svcd)');
  switch (e.code) {
    case 'secret_not_found':
      return fail('secret_not_found', `no secret named ${name} in this agent's domain`);
    case 'not_granted':
      return fail(
        'not_granted',
        `secret ${name} is not granted to this agent: ask an operator to run "svc secret grant"`,
      );
    case 'agent_not_found':
      return fail(
        'not_granted',
        'this agent is not enrolled at the tower on this node, so it is granted nothing',
      );
    case 'tower_unreachable':
      return fail('tower_unreachable', e.message);
    default:
      return fail('tower_unreachable', `the tower refused the fetch (${e.code}): ${e.message}`);
  }
}
