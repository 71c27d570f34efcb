// `svc agent cron …`: the local svcd's cron jobs, each a thin call of one mgmt.sock method
// (cron.list|describe|history|reload|gc). --json prints the method's result as is.
import type { Command } from 'commander';
import { daemonPaths } from '../../daemon/paths.js';
import { formatDuration } from '../../lib/duration.js';
import type {
  CronDescribe,
  CronFire,
  CronGc,
  CronHistory,
  CronJobView,
  CronList,
  CronReload,
} from '../../protocol/cron.js';
import { type CommandDeps, globals } from '../deps.js';
import { mgmtCall } from '../mgmt-client.js';
import { keyValues, print, table } from '../output.js';
import { UsageError } from '../run.js';

export function registerCronCommands(agent: Command, deps: CommandDeps): void {
  const cron = agent.command('cron').description("this node's cron jobs (svcd/cron.toml)");
  const call = <T>(method: string, params?: unknown) =>
    mgmtCall<T>(daemonPaths(deps.io.paths.home).mgmtSock, method, params);
  const json = (cmd: Command) => Boolean(globals(cmd).json);

  cron
    .command('list')
    .description('all jobs with their next fire time (local time of the cron timezone)')
    .action(async (_o, cmd: Command) => {
      const list = await call<CronList>('cron.list');
      if (list.config_error && !json(cmd)) {
        deps.io.err(
          `warning: the last load of cron.toml failed; the previous jobs stay in force: ${list.config_error}`,
        );
      }
      if (list.state_error && !json(cmd)) {
        deps.io.err(`warning: cron fires are skipped until state.db can be written: ${list.state_error}`);
      }
      print(deps.io, json(cmd), list, () =>
        list.jobs.length === 0
          ? `no cron jobs in ${list.file}`
          : `${table(list.jobs, [
              { header: 'name', get: (j) => j.name },
              { header: 'schedule', get: scheduleOf },
              { header: 'dispatch', get: (j) => j.dispatch },
              { header: 'session', get: (j) => j.session },
              { header: 'next fire', get: (j) => (j.enabled ? j.next_fire_local : 'disabled') },
              { header: 'last', get: (j) => lastOf(j.last_fire) },
            ])}\n\ntimezone ${list.timezone}; minutes missed while svcd is down are not caught up (see describe)`,
      );
    });

  cron
    .command('describe <name>')
    .description('full config of a job, its last fire, and what happens to missed minutes')
    .action(async (name: string, _o, cmd: Command) => {
      const d = await call<CronDescribe>('cron.describe', { name });
      print(deps.io, json(cmd), d, () =>
        keyValues({
          name: d.name,
          kind: d.kind,
          ...(d.kind === 'heartbeat'
            ? { interval: `${d.interval} (fires every ${formatDuration(d.interval_ms ?? 0)})` }
            : { schedule: d.schedule }),
          timezone: d.timezone,
          dispatch: d.dispatch,
          session: d.dispatch === 'bash' ? '- (bash jobs run without a session)' : d.session,
          prompt: d.prompt,
          enabled: d.enabled,
          timeout: d.timeout_ms === null ? null : formatDuration(d.timeout_ms),
          catch_up: d.catch_up,
          'next fire': d.next_fire_local,
          running: d.running,
          'last fire': d.last_fire
            ? `${lastOf(d.last_fire)} (scheduled ${d.last_fire.scheduled_minute})`
            : null,
          'last detail': d.last_fire?.detail ?? null,
          'missed minutes': d.missed_minutes,
          'defined at': `cron.toml line ${d.line}`,
        }),
      );
    });

  cron
    .command('history <name>')
    .description('recent fires and skips of a job, newest first (up to the last 100)')
    .option('--limit <n>', 'how many entries (1-100)', '100')
    .action(async (name: string, o: { limit: string }, cmd: Command) => {
      const limit = Number(o.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
        throw new UsageError('--limit must be an integer from 1 to 100');
      }
      const h = await call<CronHistory>('cron.history', { name, limit });
      print(deps.io, json(cmd), h, () =>
        h.items.length === 0
          ? `no fires of "${name}" yet`
          : table(h.items, [
              { header: 'scheduled', get: (f) => f.scheduled_minute },
              { header: 'outcome', get: (f) => (f.catch_up ? `${f.outcome} (catch-up)` : f.outcome) },
              { header: 'reason', get: (f) => f.reason },
              { header: 'exit', get: (f) => f.exit_code },
              {
                header: 'duration',
                get: (f) => (f.duration_ms === null ? null : formatDuration(f.duration_ms)),
              },
              { header: 'detail', get: (f) => oneLine(f.detail ?? lastLine(f.output_tail)) },
            ]),
      );
    });

  cron
    .command('reload')
    .description(
      're-read cron.toml without restarting svcd; an invalid file leaves the running jobs in force',
    )
    .action(async (_o, cmd: Command) => {
      const r = await call<CronReload>('cron.reload');
      const names = (l: string[]) => (l.length ? l.join(', ') : '-');
      print(
        deps.io,
        json(cmd),
        r,
        () =>
          `reloaded ${r.file}: ${r.jobs} job${r.jobs === 1 ? '' : 's'} (added ${names(r.added)}; removed ${names(r.removed)}; changed ${names(r.changed)})`,
      );
    });

  cron
    .command('gc-now')
    .description('drop dedup keys older than 24 h now (svcd also does it hourly)')
    .action(async (_o, cmd: Command) => {
      const r = await call<CronGc>('cron.gc');
      print(
        deps.io,
        json(cmd),
        r,
        () =>
          `removed ${r.removed} dedup key${r.removed === 1 ? '' : 's'} older than 24 h (before ${r.older_than})`,
      );
    });
}

function scheduleOf(j: CronJobView): string {
  return j.kind === 'heartbeat' ? `every ${formatDuration(j.interval_ms ?? 0)}` : (j.schedule ?? '');
}

function lastOf(f: CronFire | null): string | null {
  if (!f) return null;
  const what = f.reason ? `${f.outcome} (${f.reason})` : f.outcome;
  return `${what} ${f.started_at ?? f.finished_at ?? f.scheduled_minute}`;
}

function lastLine(text: string | null): string | null {
  if (!text) return null;
  const lines = text.trimEnd().split('\n');
  return lines[lines.length - 1] ?? null;
}

function oneLine(text: string | null): string | null {
  if (text === null) return null;
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > 80 ? `${t.slice(0, 79)}…` : t;
}
