// `svc task show <id>`: one mesh task for an operator — its timeline (created, approvals asked
// and decided, last change), result, kept work (branch, diffstat, diff artifact), output tail
// and approvals. `--json`: {task, approvals}.
import type { Command } from 'commander';
import type { Approval } from '../../protocol/approvals.js';
import type { List } from '../../protocol/common.js';
import type { MeshTask } from '../../protocol/mesh.js';
import { seg } from '../client.js';
import { type CommandDeps, globals } from '../deps.js';
import { print, table } from '../output.js';

export interface TaskView {
  task: MeshTask;
  approvals: Approval[];
}

const TAIL_MARK = '--- output tail ---\n';

export function formatTaskView(v: TaskView): string {
  const t = v.task;
  const r = (t.result ?? {}) as Record<string, unknown>;
  const lines = [
    `task ${t.id} · ${t.state} · attempt ${t.attempt}/${t.max_attempts}`,
    `title: ${t.title.split('\n')[0] ?? ''}`,
    `mission: ${t.mission_id} (domain ${t.domain_id})`,
    `agent: ${t.claimed_by ?? t.assigned_agent_id ?? '-'}`,
    '',
    'timeline:',
  ];
  const events: [string, string][] = [[t.created_at, 'created']];
  for (const a of v.approvals) {
    events.push([a.created_at, `approval ${a.id} asked: ${a.title}`]);
    if (a.decided_at)
      events.push([
        a.decided_at,
        `approval ${a.id} ${a.status} by ${a.decided_by ?? '?'}${a.reason ? `: ${a.reason}` : ''}`,
      ]);
  }
  const ended = ['completed', 'failed', 'cancelled'].includes(t.state);
  events.push([t.updated_at, ended ? `ended ${t.state}` : `last change (${t.state})`]);
  events.sort((x, y) => x[0].localeCompare(y[0]));
  for (const [at, what] of events) lines.push(`  ${at}  ${what}`);
  if (t.result !== null && t.result !== undefined) {
    lines.push('', 'result:');
    for (const k of ['summary', 'stop_reason', 'exit_code', 'duration_ms', 'run_id']) {
      if (r[k] !== undefined && r[k] !== null)
        lines.push(`  ${k}: ${String(r[k]).split('\n').join('\n    ')}`);
    }
  }
  if (typeof r.branch === 'string') {
    lines.push(
      '',
      'work:',
      `  branch: ${r.branch} (${String(r.base_commit).slice(0, 12)}..${String(r.head_commit).slice(0, 12)})`,
      `  diffstat: ${diffstat(r)}`,
    );
    if (typeof r.diff_artifact_id === 'string')
      lines.push(`  diff: artifact ${r.diff_artifact_id}${r.diff_truncated ? ' (truncated)' : ''}`);
  }
  if (t.failure_reason) {
    const i = t.failure_reason.indexOf(TAIL_MARK);
    lines.push('', `failure: ${i < 0 ? t.failure_reason : t.failure_reason.slice(0, i).trimEnd()}`);
    if (i >= 0) lines.push('', 'output tail:', t.failure_reason.slice(i + TAIL_MARK.length));
  }
  if (v.approvals.length > 0) {
    lines.push(
      '',
      'approvals:',
      table(v.approvals, [
        { header: 'id', get: (a) => a.id },
        { header: 'status', get: (a) => a.status },
        { header: 'kind', get: (a) => a.tool_call?.kind ?? '' },
        { header: 'title', get: (a) => a.tool_call?.title ?? a.title },
        { header: 'reason', get: (a) => a.reason ?? '' },
      ]),
    );
  }
  return lines.join('\n');
}

function diffstat(r: Record<string, unknown>): string {
  const n = (k: string) => Number(r[k] ?? 0);
  const files = n('files_changed');
  return `${files} file${files === 1 ? '' : 's'} changed, ${n('insertions')} insertions(+), ${n('deletions')} deletions(-)`;
}

export function registerTaskShow(task: Command, deps: CommandDeps): void {
  task
    .command('show <task_id>')
    .description('one mesh task: timeline, result, kept work, output tail, approvals')
    .action(async (id: string, _o, cmd: Command) => {
      const client = await deps.client(cmd);
      const t = await client.get<MeshTask>(`/work/tasks/${seg(id)}`);
      const q = new URLSearchParams({ task_id: t.id, domain_id: t.domain_id, limit: '500' });
      const approvals = (await client.get<List<Approval>>(`/approvals?${q}`)).items;
      const view: TaskView = { task: t, approvals };
      print(deps.io, Boolean(globals(cmd).json), view, () => formatTaskView(view));
    });
}
