// Progress of an agent run, independent of where it goes (the tower feed for supervised
// agents, report_progress for mesh tasks). ACP session updates map onto it; streamed text
// chunks are coalesced so a token-by-token agent does not become one event per token.
import type { SessionUpdate } from '@agentclientprotocol/sdk';
import type { Clock, TimerHandle } from '../../lib/clock.js';

export interface ProgressUpdate {
  /** message | thought | tool_call | tool_call_update | plan | <other ACP update kind> */
  kind: string;
  /** Human-readable text (message text, tool title), at most MAX_TEXT characters. */
  text?: string;
  /** Structured detail (tool call id and status, plan entries). */
  data?: Record<string, unknown>;
}

export const MAX_TEXT = 2048;

function clip(s: string): string {
  return s.length > MAX_TEXT ? `${s.slice(0, MAX_TEXT - 1)}…` : s;
}

function contentText(content: unknown): string | undefined {
  if (typeof content !== 'object' || content === null) return undefined;
  const c = content as { type?: unknown; text?: unknown; content?: unknown };
  if (c.type === 'text' && typeof c.text === 'string') return c.text;
  if (c.type === 'content') return contentText(c.content);
  return undefined;
}

/** One ACP session update as progress; text chunks keep their raw (unclipped) text. */
export function progressOfAcpUpdate(u: SessionUpdate): ProgressUpdate {
  switch (u.sessionUpdate) {
    case 'agent_message_chunk':
    case 'agent_thought_chunk':
    case 'user_message_chunk': {
      const kind =
        u.sessionUpdate === 'agent_message_chunk'
          ? 'message'
          : u.sessionUpdate === 'agent_thought_chunk'
            ? 'thought'
            : 'user_message';
      const text = contentText(u.content);
      return text === undefined ? { kind } : { kind, text };
    }
    case 'tool_call':
      return {
        kind: 'tool_call',
        text: clip(u.title),
        data: { tool_call_id: u.toolCallId, status: u.status ?? 'pending', tool_kind: u.kind ?? 'other' },
      };
    case 'tool_call_update': {
      const texts = (u.content ?? []).map((c) => contentText(c)).filter((t): t is string => t !== undefined);
      return {
        kind: 'tool_call_update',
        ...(texts.length ? { text: clip(texts.join('\n')) } : u.title ? { text: clip(u.title) } : {}),
        data: { tool_call_id: u.toolCallId, ...(u.status ? { status: u.status } : {}) },
      };
    }
    case 'plan':
      return {
        kind: 'plan',
        data: { entries: u.entries.map((e) => ({ content: clip(e.content), status: e.status })) },
      };
    default:
      return { kind: u.sessionUpdate };
  }
}

const COALESCED = new Set(['message', 'thought', 'user_message']);

/**
 * Merges consecutive text chunks of one kind and emits them when the kind changes, the
 * text reaches MAX_TEXT, `delayMs` passes, or flush() is called (end of a prompt turn).
 */
export class ProgressCoalescer {
  private kind: string | null = null;
  private text = '';
  private timer: TimerHandle | null = null;

  constructor(
    private readonly emit: (u: ProgressUpdate) => void,
    private readonly clock: Clock,
    private readonly delayMs = 250,
  ) {}

  push(u: ProgressUpdate): void {
    if (!COALESCED.has(u.kind) || u.text === undefined) {
      this.flush();
      this.emit(u.text === undefined ? u : { ...u, text: clip(u.text) });
      return;
    }
    if (this.kind !== u.kind) this.flush();
    this.kind = u.kind;
    this.text += u.text;
    while (this.text.length >= MAX_TEXT) {
      this.emit({ kind: u.kind, text: this.text.slice(0, MAX_TEXT) });
      this.text = this.text.slice(MAX_TEXT);
    }
    if (this.text === '') {
      this.clear();
      return;
    }
    this.timer ??= this.clock.setTimeout(() => {
      this.timer = null;
      this.flush();
    }, this.delayMs);
  }

  flush(): void {
    if (this.kind !== null && this.text !== '') this.emit({ kind: this.kind, text: this.text });
    this.clear();
  }

  private clear(): void {
    this.timer?.cancel();
    this.timer = null;
    this.kind = null;
    this.text = '';
  }
}
