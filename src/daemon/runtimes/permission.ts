// How an ACP agent's session/request_permission is answered (docs/agents.md, Permission
// policy). Supervised agents have nobody to ask and are allowed (allowEverything); task
// subagents get the worker's governed handler (worker/permission.ts). Types only, no SDK.

export interface PermissionOptionInfo {
  optionId: string;
  name: string;
  /** allow_once | allow_always | reject_once | reject_always */
  kind: string;
}

export interface PermissionRequest {
  toolCall: {
    toolCallId: string;
    title?: string | null;
    kind?: string | null;
    rawInput?: unknown;
    locations?: { path: string }[] | null;
  };
  options: PermissionOptionInfo[];
}

export type PermissionOutcome = { outcome: 'cancelled' } | { outcome: 'selected'; optionId: string };

/** Answers one permission request; `signal` aborts when the turn is cancelled or the agent stops. */
export type PermissionHandler = (req: PermissionRequest, signal: AbortSignal) => Promise<PermissionOutcome>;

/** The option of the wanted sort: once preferred, then always; null when the agent offers none. */
export function optionOf(options: PermissionOptionInfo[], want: 'allow' | 'reject'): string | null {
  const o =
    options.find((p) => p.kind === `${want}_once`) ?? options.find((p) => p.kind === `${want}_always`);
  return o?.optionId ?? null;
}

export function choose(options: PermissionOptionInfo[], want: 'allow' | 'reject'): PermissionOutcome {
  const id = optionOf(options, want);
  return id === null ? { outcome: 'cancelled' } : { outcome: 'selected', optionId: id };
}

/** Headless supervised agents: nobody is there to ask, so what the agent proposes is allowed. */
export const allowEverything: PermissionHandler = async (req) => choose(req.options, 'allow');
