// The feed event (docs/events.md, docs/feed.md). `id` is a decimal string, strictly increasing,
// also the SSE `id:` field; `type` is the discriminator.

import { Timestamp } from './common.js';
import { type Static, Type } from './type.js';

export const EVENT_TYPES = ['approval', 'inbox', 'matrix', 'progress'] as const;
export type EventType = (typeof EVENT_TYPES)[number];
export const EventTypeSchema = Type.Union(EVENT_TYPES.map((t) => Type.Literal(t)));

export const RateLimitBlock = Type.Object({
  limit: Type.Integer(),
  remaining: Type.Integer(),
  reset_at: Timestamp,
});
export type RateLimitBlock = Static<typeof RateLimitBlock>;

const NullableString = Type.Union([Type.String(), Type.Null()]);

export const FeedEvent = Type.Object({
  id: Type.String({ pattern: '^[0-9]+$' }),
  ts: Timestamp,
  type: EventTypeSchema,
  domain_id: NullableString,
  mission_id: NullableString,
  agent_id: NullableString,
  status: NullableString,
  payload: Type.Record(Type.String(), Type.Unknown()),
  rate_limit: Type.Optional(RateLimitBlock),
});
export type FeedEvent = Static<typeof FeedEvent>;

/** GET /events: a page of the feed's history, newest first (docs/feed.md). */
export const HistoryPage = Type.Object({
  items: Type.Array(FeedEvent),
  /** Pass as `before` for older events; null once the oldest kept event was read. */
  next_cursor: Type.Union([Type.String(), Type.Null()]),
  /** The newest event id when the page was read: resume the stream after it. */
  last_event_id: Type.String(),
});
export type HistoryPage = Static<typeof HistoryPage>;

const Ids = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100 });

/** The query of GET /events/stream and /events/ws: filters (each repeatable) and where to resume. */
export const StreamQuery = Type.Object(
  {
    domain_id: Type.Optional(Ids),
    mission_id: Type.Optional(Ids),
    type: Type.Optional(Type.Array(EventTypeSchema, { maxItems: 4 })),
    last_event_id: Type.Optional(Type.String({ maxLength: 30 })),
    /** Browsers cannot set headers on EventSource/WebSocket (see tower/http/auth-hook.ts). */
    access_token: Type.Optional(Type.String({ maxLength: 4096 })),
  },
  { additionalProperties: false },
);
export type StreamQuery = Static<typeof StreamQuery>;

const NullableText = Type.Union([Type.String({ maxLength: 100 }), Type.Null()]);

/** One event svcd publishes (POST /nodes/events); `key` makes a retried batch land once. */
export const NodeEvent = Type.Object(
  {
    key: Type.String({ minLength: 1, maxLength: 100 }),
    type: Type.Union([Type.Literal('matrix'), Type.Literal('progress')]),
    domain_id: Type.Optional(NullableText),
    mission_id: Type.Optional(NullableText),
    agent_id: Type.Optional(NullableText),
    status: Type.Optional(NullableText),
    payload: Type.Record(Type.String(), Type.Unknown()),
  },
  { additionalProperties: false },
);
export const NodeEventsBody = Type.Object(
  { events: Type.Array(NodeEvent, { minItems: 1, maxItems: 500 }) },
  { additionalProperties: false },
);
export type NodeEventsBody = Static<typeof NodeEventsBody>;

export const NodeEventsAccepted = Type.Object({
  accepted: Type.Integer(),
  /** Events whose key this node had already published: skipped. */
  duplicates: Type.Integer(),
});
export type NodeEventsAccepted = Static<typeof NodeEventsAccepted>;

/**
 * The `reset` SSE event of GET /events/stream (not a feed event: no id): sent before any event
 * when a resume crosses a gap; the events after `last_event_id` up to `resume_after` are gone.
 */
export interface FeedReset {
  reason: 'retention' | 'unknown';
  /** The id the client asked to resume after. */
  last_event_id: string;
  /** Events after this id follow. */
  resume_after: string;
}

/** What a producer hands to the event log; id and ts are assigned on append. */
export interface NewEvent {
  type: EventType;
  domain_id?: string | null;
  mission_id?: string | null;
  agent_id?: string | null;
  status?: string | null;
  payload: Record<string, unknown>;
}
