// `svc daemon events`: the feed as this node's svcd relays it (mgmt.sock events.subscribe),
// read with access to the node's svcd and no tower credential. Prints like `svc feed`; when
// svcd cuts it off for reading too slowly it subscribes again after the last event it printed.
import type { Command } from 'commander';
import { daemonPaths } from '../../daemon/paths.js';
import { SvcError } from '../../protocol/errors.js';
import type { FeedEvent } from '../../protocol/events.js';
import {
  EVENTS_NOTIFICATION,
  type EventsNotification,
  type EventsSubscribeParams,
  type EventsSubscribeResult,
} from '../../protocol/local-feed.js';
import { type CommandDeps, globals } from '../deps.js';
import { MgmtClient } from '../mgmt-client.js';
import { type FeedOpts, feedLimit, feedOptions, formatEvent, resetNotice } from './feed.js';

export function registerDaemonEvents(daemon: Command, deps: CommandDeps): void {
  feedOptions(
    daemon
      .command('events')
      .description("follow the feed as this node's svcd relays it (needs [fanout] enable = true)"),
  )
    .addHelpText(
      'after',
      '\nIds are the fan-out\'s ("1234", or "1234.2" for events svcd adds). See docs/fanout.md.',
    )
    .action(async (o: FeedOpts, cmd: Command) => {
      const json = Boolean(globals(cmd).json);
      const limit = feedLimit(o);
      const sock = daemonPaths(deps.io.paths.home).mgmtSock;
      const filter: EventsSubscribeParams = {
        ...(o.type ? { type: o.type } : {}),
        ...(o.domain ? { domain_id: o.domain } : {}),
        ...(o.mission ? { mission_id: o.mission } : {}),
      };
      let last: string | null = o.since ?? null;
      let seen = 0;
      let stopped = false;
      for (;;) {
        const client = await MgmtClient.connect(sock);
        const stop = () => {
          stopped = true;
          client.close();
        };
        client.onNotification = (method, params) => {
          if (method !== EVENTS_NOTIFICATION || stopped) return;
          const { event } = params as EventsNotification;
          if (event.type === 'reset') {
            const r = event as unknown as { reason: string; resume_after: string; id?: string };
            deps.io.err(resetNotice(r.reason, last, r.resume_after));
            last = r.id ?? r.resume_after;
            return;
          }
          last = event.id ?? last;
          deps.io.out(json ? JSON.stringify(event) : formatEvent(event as unknown as FeedEvent));
          if (++seen >= limit) stop();
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
        let result: EventsSubscribeResult;
        try {
          result = await client.call<EventsSubscribeResult>('events.subscribe', {
            ...filter,
            ...(last !== null ? { last_event_id: last } : {}),
          });
        } catch (e) {
          if (stopped) return;
          if (e instanceof SvcError && e.code === 'unavailable' && last !== null) {
            throw new SvcError('unavailable', `${e.message}; resume with --since ${last}`);
          }
          throw e;
        } finally {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
          client.close();
        }
        if (result.ended !== 'slow_consumer') {
          throw new SvcError(
            'unavailable',
            `svcd ended the stream (${result.ended})${last !== null ? `; resume with --since ${last}` : ''}`,
          );
        }
        deps.io.err(`svcd cut this reader off for reading too slowly; resuming after ${last ?? 'now'}`);
      }
    });
}
