// What the fan-out hands its local consumers (/events, /events/ws, mgmt.sock events.subscribe)
// and how far one may lag. Apart from listener.ts so that the mgmt.sock methods and fanout.ts
// load the listener (node:http, ws) only when the fan-out is on.
import type { FeedEvent } from '../../protocol/events.js';
import type { RingEntry } from './ring.js';

/** What travels to consumers: the event's filter fields and its two serializations, made once. */
export interface LocalEvent {
  /** SSE event name: message, matrix-down, matrix-up, reset. */
  name: string;
  /** Filter fields of a `message` (null for connection-state events, which every consumer gets). */
  meta: Pick<FeedEvent, 'type' | 'domain_id' | 'mission_id'> | null;
  sse: string;
  json: string;
}

export type Entry = RingEntry<LocalEvent>;

/** Unread bytes a consumer may leave before it is cut off (it resumes by id from the ring). */
export const CONSUMER_BUFFER_LIMIT = 1024 * 1024;

/** What a consumer asked for; an empty list lets everything through. */
export interface Filter {
  types: string[];
  domains: string[];
  missions: string[];
}

/** One reader of the stream: an SSE response, a WebSocket, a mgmt.sock subscription. */
export interface Consumer {
  filter: Filter;
  /** Sends one live entry; a consumer too far behind is cut off (it resumes by id). */
  send(e: Entry): void;
  /** Sends the replay at once: its size is bounded by the ring, so it does not count against the limit. */
  replay(entries: Entry[]): void;
  keepalive(): void;
  close(): void;
}
