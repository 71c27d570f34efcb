// `svc feed` (follow the event feed), `svc approvals …` and `svc inbox …`.
import type { Command } from 'commander';
import { Backoff } from '../../lib/backoff.js';
import { readSse } from '../../lib/sse-reader.js';
import type { Approval, InboxMessage } from '../../protocol/approvals.js';
import type { List } from '../../protocol/common.js';
import { errorFromProblem, SvcError } from '../../protocol/errors.js';
import type { FeedEvent } from '../../protocol/events.js';
import { seg } from '../client.js';
import { type CommandDeps, collect, globals } from '../deps.js';
import { keyValues, print, table } from '../output.js';

export interface FeedOpts {
  domain?: string[];
  mission?: string[];
  type?: string[];
  since?: string;
  limit?: string;
}

/** The filter, resume and limit options of `svc feed`, which `svc daemon events` shares. */
export function feedOptions(cmd: Command): Command {
  return cmd
    .option('--domain <domain_id>', 'only this domain (repeatable)', collect)
    .option('--mission <mission_id>', 'only this mission (repeatable)', collect)
    .option('--type <type>', 'approval | inbox | matrix | progress (repeatable)', collect)
    .option('--since <event_id>', 'replay every event after this id first (0: from the oldest kept)')
    .option('--limit <n>', 'exit after this many events');
}

/** --limit as a number (no limit: infinity); a usage error when it is not positive. */
export function feedLimit(o: FeedOpts): number {
  const limit = o.limit !== undefined ? Number(o.limit) : Number.POSITIVE_INFINITY;
  if (!(limit > 0)) throw new SvcError('bad_request', '--limit must be a positive number');
  return limit;
}

/** What a reader prints when the stream says events after `last` are gone. */
export function resetNotice(reason: string, last: string | null, resumeAfter: string): string {
  return `feed reset (${reason}): events after ${last ?? 'now'} are no longer kept; continuing after ${resumeAfter}`;
}

/** One line per event: id, time, type, where, and what happened. */
export function formatEvent(e: FeedEvent): string {
  const where = [e.domain_id, e.mission_id, e.agent_id].filter((x) => x !== null).join('/');
  const p = e.payload;
  const what =
    e.type === 'matrix'
      ? [p.entity, p.action ?? p.event, p.id ?? p.job, p.title ?? p.name]
          .filter((x) => x !== undefined)
          .join(' ')
      : e.type === 'approval'
        ? `${p.action} "${String(p.title ?? '')}"${p.reason ? ` (${String(p.reason)})` : ''}`
        : e.type === 'inbox'
          ? `to ${e.agent_id ?? '?'}: ${String(p.text ?? '')}`
          : [p.kind, p.text].filter((x) => x !== undefined).join(': ');
  // One line per event: newlines inside texts are shown as \n.
  const line = `#${e.id} ${e.ts} ${e.type.padEnd(8)} ${where || '-'}${e.status ? ` [${e.status}]` : ''} ${what}`;
  return line.trimEnd().replace(/\r?\n/g, '\\n');
}

export function registerFeed(program: Command, deps: CommandDeps): void {
  feedOptions(
    program.command('feed').description('follow the event feed live (reconnects and resumes by id)'),
  ).action(async (o: FeedOpts, cmd: Command) => {
    const client = await deps.client(cmd);
    const json = Boolean(globals(cmd).json);
    if (!client.token) {
      throw new SvcError(
        'unauthenticated',
        'no credential: run "svc login --url URL --token TOKEN" or set SVC_TOKEN',
      );
    }
    const limit = feedLimit(o);
    if (o.since !== undefined && !/^[0-9]+$/.test(o.since)) {
      throw new SvcError('bad_request', '--since must be an event id (a decimal number)');
    }
    const q = new URLSearchParams();
    for (const d of o.domain ?? []) q.append('domain_id', d);
    for (const m of o.mission ?? []) q.append('mission_id', m);
    for (const t of o.type ?? []) q.append('type', t);
    let last: string | null = o.since ?? null;
    let seen = 0;
    const backoff = new Backoff();
    for (;;) {
      let outcome: 'ended' | 'done' | 'failed' = 'failed';
      try {
        const url = `${client.url}/events/stream${q.size > 0 ? `?${q}` : ''}`;
        const res = await fetch(url, {
          headers: {
            authorization: `Bearer ${client.token}`,
            accept: 'text/event-stream',
            ...(last !== null ? { 'last-event-id': last } : {}),
          },
        });
        if (res.status >= 400) {
          const err = errorFromProblem(res.status, await res.text());
          // Credentials and bad filters do not heal by retrying.
          if (res.status < 500 && res.status !== 429) throw err;
          throw Object.assign(new Error(err.message), { retry: true });
        }
        if (!res.body) throw new Error('empty response');
        backoff.reset();
        const end = await readSse(res.body, {
          event: ({ name, id, data }) => {
            if (name === 'reset') {
              const info = JSON.parse(data) as { reason: string; resume_after: string };
              deps.io.err(resetNotice(info.reason, last, info.resume_after));
              last = info.resume_after;
              return true;
            }
            if (name !== 'message') return true;
            const ev = JSON.parse(data) as FeedEvent;
            last = id ?? ev.id;
            deps.io.out(json ? JSON.stringify(ev) : formatEvent(ev));
            seen++;
            return seen < limit;
          },
        });
        outcome = end === 'stopped' ? 'done' : 'ended';
      } catch (e) {
        if (e instanceof SvcError) throw e;
        const cause = (e as { cause?: { code?: string; message?: string } }).cause;
        deps.io.err(
          `feed connection failed: ${(e as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ''}`,
        );
      }
      if (outcome === 'done') return;
      const wait = backoff.next();
      deps.io.err(
        `${new Date().toISOString()} feed disconnected; reconnecting in ${(wait / 1000).toFixed(1)} s${
          last !== null ? ` from event ${last}` : ''
        }`,
      );
      await new Promise((r) => setTimeout(r, wait));
    }
  });

  const approvals = program.command('approvals').description('approvals agents asked for');
  approvals
    .command('list')
    .description('list approvals (newest last)')
    .option('--domain <domain_id>', 'only this domain')
    .option('--status <status>', 'pending | approved | rejected')
    .option('--limit <n>', 'page size', '100')
    .option('--cursor <cursor>', 'continue from a previous page')
    .action(async (o: { domain?: string; status?: string; limit: string; cursor?: string }, cmd: Command) => {
      const q = new URLSearchParams({ limit: o.limit });
      if (o.domain) q.set('domain_id', o.domain);
      if (o.status) q.set('status', o.status);
      if (o.cursor) q.set('cursor', o.cursor);
      const res = await (await deps.client(cmd)).get<List<Approval>>(`/approvals?${q}`);
      print(
        deps.io,
        Boolean(globals(cmd).json),
        res,
        () =>
          table(res.items, [
            { header: 'id', get: (a) => a.id },
            { header: 'status', get: (a) => a.status },
            { header: 'title', get: (a) => a.title },
            { header: 'agent', get: (a) => a.agent_id ?? '' },
            { header: 'requested', get: (a) => a.created_at },
          ]) + (res.next_cursor ? `\nmore: --cursor ${res.next_cursor}` : ''),
      );
    });
  for (const decision of ['approve', 'reject'] as const) {
    approvals
      .command(`${decision} <approval_id>`)
      .description(`${decision} a pending approval (final)`)
      .option('--reason <text>', 'why, shown to the agent')
      .action(async (id: string, o: { reason?: string }, cmd: Command) => {
        const a = await (await deps.client(cmd)).post<Approval>(
          `/approvals/${seg(id)}/${decision}`,
          o.reason ? { reason: o.reason } : {},
        );
        print(deps.io, Boolean(globals(cmd).json), a, () => keyValues(a));
      });
  }

  const inbox = program.command('inbox').description('messages to agents');
  inbox
    .command('send <agent_id> <text>')
    .description('send a message to an agent')
    .option('--domain <domain_id>', 'the agent’s domain (needed when it is not enrolled on the tower)')
    .action(async (agentId: string, text: string, o: { domain?: string }, cmd: Command) => {
      const m = await (await deps.client(cmd)).post<InboxMessage>('/inbox', {
        agent_id: agentId,
        text,
        ...(o.domain ? { domain_id: o.domain } : {}),
      });
      print(deps.io, Boolean(globals(cmd).json), m, () => keyValues(m));
    });
  inbox
    .command('list')
    .description('list messages')
    .option('--agent <agent_id>', 'only to this agent')
    .option('--domain <domain_id>', 'only this domain')
    .option('--limit <n>', 'page size', '100')
    .action(async (o: { agent?: string; domain?: string; limit: string }, cmd: Command) => {
      const q = new URLSearchParams({ limit: o.limit });
      if (o.agent) q.set('agent_id', o.agent);
      if (o.domain) q.set('domain_id', o.domain);
      const res = await (await deps.client(cmd)).get<List<InboxMessage>>(`/inbox?${q}`);
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        table(res.items, [
          { header: 'id', get: (m) => m.id },
          { header: 'agent', get: (m) => m.agent_id },
          { header: 'from', get: (m) => m.sent_by },
          { header: 'text', get: (m) => m.text },
          { header: 'sent', get: (m) => m.created_at },
        ]),
      );
    });
}
