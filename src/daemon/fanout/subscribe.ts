// mgmt.sock events.subscribe / events.unsubscribe: the fan-out's stream as JSON-RPC
// notifications on the caller's own connection, with the filters, resume and backlog limit of
// /events. Owns the open streams; what each one gets is the listener's decision.
import { SvcError } from '../../protocol/errors.js';
import {
  EVENTS_NOTIFICATION,
  type EventsEndReason,
  type EventsNotification,
  EventsSubscribeParams,
  type EventsSubscribeResult,
  EventsUnsubscribeParams,
} from '../../protocol/local-feed.js';
import { type MgmtMethod, method } from '../mgmt/method.js';
import { CONSUMER_BUFFER_LIMIT, type Consumer, type Entry } from './consumer.js';
import type { FanoutListener } from './listener.js';
import { parseEventKey } from './ring.js';

export interface EventMethodsOptions {
  /** The running listener; throws the SvcError to answer when there is none (fan-out off, starting). */
  listener(): FanoutListener;
  /** Unread bytes a client may leave before its stream is ended (default: as /events). */
  backlogLimit?: number;
}

type Stream = (reason: EventsEndReason) => void;

export function eventMethods(opts: EventMethodsOptions): MgmtMethod[] {
  const limit = opts.backlogLimit ?? CONSUMER_BUFFER_LIMIT;
  // Open streams per connection (call.signal is the connection's), by the subscribing request's
  // id: a client ends only its own.
  const open = new WeakMap<AbortSignal, Map<string | number, Stream>>();

  const subscribe = method(
    'events.subscribe',
    async (params, call): Promise<EventsSubscribeResult> => {
      const p = params as EventsSubscribeParams;
      const listener = opts.listener();
      const id = call.id;
      if (id === null) {
        throw new SvcError(
          'bad_request',
          'events.subscribe must be a request with an id (not a notification or in a batch): the stream is named by it',
        );
      }
      const after = p.last_event_id ?? null;
      if (after !== null && parseEventKey(after) === null) {
        throw new SvcError(
          'validation_failed',
          `params/last_event_id: "${after.slice(0, 30)}" is not an event id`,
          {
            errors: [{ field: 'params/last_event_id', message: 'must be an id such as "1234" or "1234.2"' }],
          },
        );
      }
      let streams = open.get(call.signal);
      if (!streams) {
        streams = new Map();
        open.set(call.signal, streams);
      }
      if (streams.has(id)) {
        throw new SvcError('conflict', `a stream named by request id ${JSON.stringify(id)} is already open`);
      }
      const mine = streams;
      return new Promise<EventsSubscribeResult>((resolve) => {
        let sent = 0;
        let last: string | null = null;
        let allowance = limit;
        let done = false;
        let remove = () => {};
        const notify = (event: EventsNotification['event']) => {
          const n: EventsNotification = { subscription: id, event };
          call.notify(EVENTS_NOTIFICATION, n);
        };
        const deliver = (e: Entry) => {
          notify(JSON.parse(e.value.json) as EventsNotification['event']);
          sent++;
          last = e.id;
        };
        const end: Stream = (reason) => {
          if (done) return;
          done = true;
          remove();
          mine.delete(id);
          call.signal.removeEventListener('abort', onClose);
          resolve({ ended: reason, last_event_id: last, events: sent });
        };
        // Nobody reads the reply of a closed connection: the reason only frees the stream.
        const onClose = () => end('unsubscribed');
        const consumer: Consumer = {
          filter: { types: p.type ?? [], domains: p.domain_id ?? [], missions: p.mission_id ?? [] },
          send: (e) => {
            if (done) return;
            if (call.unread() > allowance) {
              end('slow_consumer');
              return;
            }
            deliver(e);
          },
          // The replay is bounded by the ring: like /events, it does not count against the limit.
          replay: (entries) => {
            for (const e of entries) deliver(e);
            if (entries.length > 0) allowance = call.unread() + limit;
          },
          // A unix socket has no proxy to keep awake.
          keepalive: () => {},
          close: () => end('shutdown'),
        };
        mine.set(id, end);
        call.signal.addEventListener('abort', onClose, { once: true });
        remove = listener.subscribe(consumer, after, (reset) => notify({ type: 'reset', ...reset }));
        call.streaming();
        if (call.signal.aborted) onClose();
      });
    },
    EventsSubscribeParams,
  );

  const unsubscribe = method(
    'events.unsubscribe',
    async (params, call) => {
      const { subscription } = params as EventsUnsubscribeParams;
      const end = open.get(call.signal)?.get(subscription);
      if (!end) {
        throw new SvcError(
          'not_found',
          `no open events.subscribe stream with request id ${JSON.stringify(subscription)} on this connection`,
        );
      }
      end('unsubscribed');
      return { unsubscribed: subscription };
    },
    EventsUnsubscribeParams,
  );
  return [subscribe, unsubscribe];
}
