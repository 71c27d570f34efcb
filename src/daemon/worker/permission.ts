// The governed answer to a task subagent's ACP permission requests (docs/agents.md, Permission
// policy): the policy decides; allow and deny answer at once, ask creates an approval on the
// tower and the turn waits (the lease heartbeat goes on) for the operator, the timeout or the
// end of the run. What was asked is kept for the task's result.
import type { Logger } from '../../lib/log.js';
import type { ApprovalToolCall } from '../../protocol/approvals.js';
import { choose, type PermissionHandler, type PermissionOutcome } from '../runtimes/permission.js';
import type { ApprovalDecision, ApprovalsApi, ApprovalWaits } from './approval-waits.js';
import type { ProgressReport, WorkTask } from './mesh-api.js';
import { decide, type EffectivePolicy, toolCallFacts } from './policy.js';

export interface GovernedRun {
  task: WorkTask;
  agentId: string;
  workdir: string;
  policy: EffectivePolicy;
  approvalTimeoutMs: number;
}

export interface AskedApproval {
  approval_id: string;
  kind: string;
  title: string;
  status: 'approved' | 'rejected';
  reason: string | null;
  by: ApprovalDecision['by'];
}

export interface GovernedPermission {
  handler: PermissionHandler;
  /** Approvals asked during the run, in order, once decided. */
  asked: AskedApproval[];
}

/** What an approval shows of a call's input. */
export const INPUT_EXCERPT_CHARS = 2000;

export function governedPermission(
  deps: {
    approvals: ApprovalsApi;
    waits: ApprovalWaits;
    progress(p: ProgressReport): void;
    log: Logger;
  },
  run: GovernedRun,
): GovernedPermission {
  const asked: AskedApproval[] = [];
  const handler: PermissionHandler = async (req, signal): Promise<PermissionOutcome> => {
    const facts = toolCallFacts(req.toolCall, run.workdir);
    const d = decide(run.policy, facts, run.workdir);
    const title = redactText(facts.title).slice(0, 500);
    deps.log.info({ kind: facts.kind, title, action: d.action, by: d.by }, 'permission request');
    if (d.action === 'allow') return choose(req.options, 'allow');
    if (d.action === 'deny') {
      deps.progress({
        message: `denied by ${d.by}: ${title}`,
        data: { kind: 'permission', action: 'deny', rule: d.by, tool_kind: facts.kind },
      });
      return choose(req.options, 'reject');
    }
    const toolCall: ApprovalToolCall = {
      kind: facts.kind,
      title,
      input: inputExcerpt(req.toolCall.rawInput ?? null),
      options: req.options.slice(0, 20).map((o) => ({
        option_id: o.optionId.slice(0, 200),
        name: o.name.slice(0, 500),
        kind: o.kind.slice(0, 50),
      })),
      rule: d.by,
    };
    const approval = await deps.approvals.create({
      domain_id: run.task.domain_id,
      mission_id: run.task.mission_id,
      agent_id: run.agentId,
      task_id: run.task.id,
      title: `${facts.kind}: ${title}`.slice(0, 500),
      detail: `Task ${run.task.id} (${run.task.title.slice(0, 200)}) asks to ${facts.kind}: ${title}`,
      tool_call: toolCall,
    });
    deps.progress({
      message: `waiting for approval ${approval.id}: ${title}`,
      data: {
        kind: 'permission',
        action: 'ask',
        approval_id: approval.id,
        rule: d.by,
        tool_kind: facts.kind,
      },
    });
    const decision = await deps.waits.wait(approval.id, run.approvalTimeoutMs, signal);
    asked.push({
      approval_id: approval.id,
      kind: facts.kind,
      title,
      status: decision.status,
      reason: decision.reason,
      by: decision.by,
    });
    deps.progress({
      message: `approval ${approval.id} ${decision.status}${decision.reason ? `: ${decision.reason}` : ''}`,
      data: {
        kind: 'permission',
        action: decision.status,
        approval_id: approval.id,
        by: decision.by,
        ...(decision.reason ? { reason: decision.reason } : {}),
      },
    });
    if (signal.aborted) return { outcome: 'cancelled' };
    return choose(req.options, decision.status === 'approved' ? 'allow' : 'reject');
  };
  return { handler, asked };
}

const SECRET_KEY = /secret|token|passw|api[_-]?key|auth|credential|private[_-]?key|cookie|session/i;
const SECRET_TEXT: [RegExp, string][] = [
  [/\b(sk|pk|rk)-[A-Za-z0-9_-]{16,}/g, '[redacted]'],
  [/\bgh[pousr]_[A-Za-z0-9]{20,}/g, '[redacted]'],
  [/\bAKIA[0-9A-Z]{16}\b/g, '[redacted]'],
  [/\bxox[abprs]-[A-Za-z0-9-]{10,}/g, '[redacted]'],
  [/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, '[redacted]'],
  [/\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi, '$1 [redacted]'],
  [
    /\b([A-Za-z_]*(?:secret|token|passw\w*|api[_-]?key)[A-Za-z_]*)(\s*[=:]\s*)("[^"]*"|'[^']*'|\S+)/gi,
    '$1$2[redacted]',
  ],
  [/(:\/\/[^/\s:@]+:)[^@\s/]+@/g, '$1[redacted]@'],
];

/** Text with secret-looking values (tokens, keys, passwords in assignments and URLs) replaced. */
export function redactText(s: string): string {
  let out = s;
  for (const [re, to] of SECRET_TEXT) out = out.replace(re, to);
  return out;
}

function redactValue(v: unknown, depth: number): unknown {
  if (typeof v === 'string') return redactText(v);
  if (depth > 8 || v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map((x) => redactValue(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    // Environment maps carry credentials by convention: none of their values are shown.
    if (SECRET_KEY.test(k)) out[k] = '[redacted]';
    else if (/^env(ironment)?$/i.test(k) && x !== null && typeof x === 'object')
      out[k] = Object.fromEntries(Object.keys(x).map((e) => [e, '[redacted]']));
    else out[k] = redactValue(x, depth + 1);
  }
  return out;
}

/** The call's input as JSON, secrets removed, at most INPUT_EXCERPT_CHARS (marked when cut). */
export function inputExcerpt(raw: unknown): string {
  const text = JSON.stringify(redactValue(raw, 0)) ?? 'null';
  return text.length > INPUT_EXCERPT_CHARS ? `${text.slice(0, INPUT_EXCERPT_CHARS - 13)}…(truncated)` : text;
}
