// mgmt.sock's events.subscribe (docs/fanout.md): the feed as svcd's fan-out relays it, streamed
// on the mgmt.sock connection. The request stays open while it streams; each event is an
// `events.event` notification; the reply comes when the stream ends and says why.
import { type Static, Type } from './type.js';

export const EventsSubscribeParams = Type.Object(
  {
    /** Only these event types (repeatable; connection events such as matrix-down pass every filter). */
    type: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    domain_id: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    mission_id: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    /** Replay what followed this id ("1234" or "1234.2") from svcd's buffer first. */
    last_event_id: Type.Optional(Type.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);
export type EventsSubscribeParams = Static<typeof EventsSubscribeParams>;

/** Ends the subscription started by the events.subscribe request with this JSON-RPC id. */
export const EventsUnsubscribeParams = Type.Object(
  { subscription: Type.Union([Type.String(), Type.Number()]) },
  { additionalProperties: false },
);
export type EventsUnsubscribeParams = Static<typeof EventsUnsubscribeParams>;

export const EVENTS_NOTIFICATION = 'events.event';

/**
 * The params of an `events.event` notification. `event` is a feed event (docs/events.md) or,
 * where a gap could not be avoided, `{"type":"reset","reason","last_event_id","resume_after"}`:
 * the same objects as the fan-out's /events/ws frames.
 */
export interface EventsNotification {
  /** The JSON-RPC id of the events.subscribe request this stream answers. */
  subscription: string | number;
  event: { type: string; id?: string } & Record<string, unknown>;
}

/**
 * Why a stream ended: the client asked (`unsubscribed`), it left more than the backlog limit
 * unread (`slow_consumer`: resume with last_event_id), or svcd is stopping (`shutdown`).
 */
export type EventsEndReason = 'unsubscribed' | 'slow_consumer' | 'shutdown';

/** The reply to events.subscribe, sent when the stream ends. */
export interface EventsSubscribeResult {
  ended: EventsEndReason;
  /** Id of the last event sent on this stream (resume after it), null if none was. */
  last_event_id: string | null;
  /** Events sent on this stream. */
  events: number;
}
