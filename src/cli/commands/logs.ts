// `svc logs [tower|svcd|<agent>] [-f] [--since D|TIME] [-n N]`: the logs of this SVC_HOME's
// tower, svcd and agents, as `journalctl`, `kubectl logs` and `pm2 logs` show theirs. pino
// lines are shown with a readable time (the file keeps epoch ms); --json prints them as they
// are. Sources: src/cli/logs/sources.ts; reading and following: file-log.ts, journal.ts.
import { Argument, type Command } from 'commander';
import { daemonPaths } from '../../daemon/paths.js';
import { systemClock } from '../../lib/clock.js';
import { formatLogLine, parsePinoLine } from '../../lib/log-format.js';
import type { AgentStatus } from '../../protocol/agents.js';
import { completeWith } from '../completion/spec.js';
import { type CommandDeps, globals } from '../deps.js';
import { openLog } from '../logs/file-log.js';
import { readJournal } from '../logs/journal.js';
import { parseLines, parseSince } from '../logs/since.js';
import { defaultSources, type LogSource, resolveSource } from '../logs/sources.js';
import { mgmtCall } from '../mgmt-client.js';
import { UsageError } from '../run.js';

/** How often a followed file is looked at for new lines and rotations. */
const POLL_MS = 250;
/** Lines shown before following when neither -n nor --since says otherwise (journalctl: 10). */
const DEFAULT_LINES = 100;

interface LogsFlags {
  follow?: boolean;
  since?: string;
  lines?: string;
  utc?: boolean;
}

/**
 * One line for the terminal or, with --json, one JSON object per line: a pino line as it is,
 * any other line (an agent's output, a crash trace) as {"line": …}; with several sources,
 * `source` says whose it is.
 */
export function renderLine(line: string, o: { json: boolean; utc: boolean; source: string | null }): string {
  if (o.json) {
    if (parsePinoLine(line)) return line;
    return JSON.stringify(o.source ? { source: o.source, line } : { line });
  }
  const text = formatLogLine(line, { utc: o.utc });
  return o.source ? text.replace(/^/gm, `${o.source} | `) : text;
}

export function registerLogs(program: Command, deps: CommandDeps): void {
  program
    .command('logs')
    .description("show (-f: follow) the logs of this node's tower, svcd or an agent")
    .addArgument(
      completeWith(
        new Argument('[source]', 'tower, svcd, or an agent id or profile (default: tower and svcd)'),
        ['tower', 'svcd'],
      ),
    )
    .option('-f, --follow', 'keep printing lines as they are written, across rotations, until Ctrl-C')
    .option(
      '--since <when>',
      'only lines from then on: a duration back (10m, 1h30m, 2d) or a time (2026-05-03 17:30)',
    )
    .option(
      '-n, --lines <n>',
      `the last N lines first, or "all" (default ${DEFAULT_LINES}; with --since: all)`,
    )
    .option('--utc', 'show times in UTC instead of local time')
    .action(async (which: string | undefined, o: LogsFlags, cmd: Command) => {
      const json = Boolean(globals(cmd).json);
      let lines: number;
      let since: number | null;
      try {
        since = o.since !== undefined ? parseSince(o.since, systemClock.now()) : null;
        lines =
          o.lines !== undefined
            ? parseLines(o.lines)
            : since !== null
              ? Number.POSITIVE_INFINITY
              : DEFAULT_LINES;
      } catch (e) {
        throw new UsageError((e as Error).message);
      }
      const home = deps.io.paths.home;
      const sourceDeps = {
        home,
        env: deps.io.env,
        agentStatus: (id: string) =>
          mgmtCall<AgentStatus>(daemonPaths(home).mgmtSock, 'agent.status', { id }),
      };
      const sources = which ? [await resolveSource(which, sourceDeps)] : await defaultSources(sourceDeps);
      const follow = o.follow === true;
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      if (follow) {
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
      }
      try {
        await show(sources, { lines, since, follow, json, utc: o.utc === true }, stop);
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });

  async function show(
    sources: LogSource[],
    o: { lines: number; since: number | null; follow: boolean; json: boolean; utc: boolean },
    stop: AbortController,
  ): Promise<void> {
    const signal = stop.signal;
    const emitFor = (s: LogSource) => {
      const r = { json: o.json, utc: o.utc, source: sources.length > 1 ? s.name : null };
      return (line: string) => deps.io.out(renderLine(line, r));
    };
    // Each file's last lines first, source after source; then every source followed at once.
    // One source failing (journalctl gone) ends the command: the others stop with it.
    const followers: Promise<void>[] = [];
    const failures: unknown[] = [];
    const following = (p: Promise<void>) =>
      followers.push(
        p.catch((e: unknown) => {
          failures.push(e);
          stop.abort();
        }),
      );
    try {
      for (const s of sources) {
        const emit = emitFor(s);
        if (s.kind === 'journal') {
          const read = readJournal(
            { unit: s.unit, lines: o.lines, since: o.since, follow: o.follow },
            deps.io.env,
            emit,
            signal,
          );
          if (o.follow) following(read);
          else await read;
          continue;
        }
        const log = await openLog(s.file, { lines: o.lines, since: o.since, follow: o.follow });
        for (const l of log.lines) emit(l);
        if (o.follow) {
          following(
            log.follow(emit, {
              clock: systemClock,
              pollMs: POLL_MS,
              signal,
              notice: (t) => deps.io.err(`svc logs: ${t}`),
            }),
          );
        } else {
          await log.close();
        }
      }
    } catch (e) {
      // A later source failed to open: the ones already followed stop too.
      stop.abort();
      await Promise.all(followers);
      throw e;
    }
    await Promise.all(followers);
    if (failures.length > 0) throw failures[0];
  }
}
