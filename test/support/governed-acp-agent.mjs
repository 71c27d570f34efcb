#!/usr/bin/env node
// A test ACP agent for governed runs (test/e2e/governed-runs.test.ts): each prompt asks
// permission to edit notes.txt and to execute a command (whose input carries a token the
// approval must not show), does what it was allowed to, and ends its turn saying what
// happened: "edit: allowed|refused; execute: allowed|refused". A prompt that says "big notes"
// writes notes longer than the diff artifact's cap (test/e2e/console-governed.test.ts).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';

const OPTIONS = [
  { optionId: 'yes', name: 'Allow', kind: 'allow_once' },
  { optionId: 'no', name: 'Reject', kind: 'reject_once' },
];
const cwds = new Map();
let sessions = 0;

const app = acp
  .agent({ name: 'governed-test-agent' })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: 'governed-test-agent', version: '1' },
    authMethods: [],
  }))
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const sessionId = `gov-${++sessions}`;
    cwds.set(sessionId, params.cwd);
    return { sessionId };
  })
  .onNotification(acp.methods.agent.session.cancel, () => {})
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const cwd = cwds.get(params.sessionId);
    const ask = async (toolCall) => {
      const r = await client.request(acp.methods.client.session.requestPermission, {
        sessionId: params.sessionId,
        toolCall,
        options: OPTIONS,
      });
      return r.outcome.outcome === 'selected' && r.outcome.optionId === 'yes' ? 'allowed' : 'refused';
    };
    const edit = await ask({
      toolCallId: 'edit-1',
      title: 'Write notes.txt',
      kind: 'edit',
      rawInput: { path: 'notes.txt', content: 'governed\n' },
      locations: [{ path: join(cwd, 'notes.txt') }],
    });
    const prompt = params.prompt.map((b) => (b.type === 'text' ? b.text : '')).join('');
    // 4 000 lines of 80 bytes: a diff of over 320 KB, past svcd's 256 KiB cap.
    const notes = prompt.includes('big notes')
      ? `governed\n${`${'n'.repeat(79)}\n`.repeat(4000)}`
      : 'governed\n';
    if (edit === 'allowed') writeFileSync(join(cwd, 'notes.txt'), notes);
    const command = 'echo built > built.txt';
    const execute = await ask({
      toolCallId: 'exec-1',
      title: `Run ${command}`,
      kind: 'execute',
      rawInput: { command, env: { API_TOKEN: 'sk-live-0123456789abcdefghij' } },
    });
    if (execute === 'allowed') execFileSync('sh', ['-c', command], { cwd });
    const text = `edit: ${edit}; execute: ${execute}\n`;
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } },
    });
    return { stopReason: 'end_turn' };
  });

const conn = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await conn.closed;
