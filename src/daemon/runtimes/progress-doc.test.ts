// docs/events.md names the `kind` of every progress event an ACP agent's session update
// becomes (it once named the raw ACP names and an `output` kind nothing sends).
import { readFileSync } from 'node:fs';
import type { SessionUpdate } from '@agentclientprotocol/sdk';
import { describe, expect, it } from 'vitest';
import { progressOfAcpUpdate } from './progress.js';

const text = { type: 'text', text: 'x' } as const;
const UPDATES = [
  { sessionUpdate: 'agent_message_chunk', content: text },
  { sessionUpdate: 'agent_thought_chunk', content: text },
  { sessionUpdate: 'user_message_chunk', content: text },
  { sessionUpdate: 'tool_call', toolCallId: 't1', title: 'read' },
  { sessionUpdate: 'tool_call_update', toolCallId: 't1', status: 'completed' },
  { sessionUpdate: 'plan', entries: [] },
  { sessionUpdate: 'available_commands_update', availableCommands: [] },
  { sessionUpdate: 'current_mode_update', currentModeId: 'code' },
] as unknown as SessionUpdate[];

describe('docs/events.md, progress kinds', () => {
  const doc = readFileSync(new URL('../../../docs/events.md', import.meta.url), 'utf8');
  const section = doc.slice(doc.indexOf('## `progress`'), doc.indexOf('## `reset`'));

  it('names the kind of each ACP session update', () => {
    const kinds = UPDATES.map((u) => progressOfAcpUpdate(u).kind);
    expect(kinds).toEqual([
      'message',
      'thought',
      'user_message',
      'tool_call',
      'tool_call_update',
      'plan',
      'available_commands_update',
      'current_mode_update',
    ]);
    expect(kinds.filter((k) => !section.includes(`\`${k}\``))).toEqual([]);
  });

  it('does not promise kinds nothing sends', () => {
    for (const stale of ['`output`', '`agent_message_chunk`']) expect(section).not.toContain(stale);
  });
});
