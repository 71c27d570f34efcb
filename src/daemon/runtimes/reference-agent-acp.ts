// The ACP reference agent (`svcd reference-agent --acp`): answers session/prompt following
// reference-verbs.ts, streaming thoughts, tool calls and the answer as session updates.
// Kept apart from the CLI modes so they do not load the ACP SDK.
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import type { ReferenceIO } from './reference-agent.js';
import { perform } from './reference-verbs.js';

/** ACP over stdio: resolves with the exit code when the client closes the connection. */
export async function runAcpAgent(io: ReferenceIO, version: string): Promise<number> {
  let sessions = 0;
  const running = new Map<string, AbortController>();
  let exitCode: number | null = null;
  const app = acp
    .agent({ name: 'svcd-reference-agent' })
    .onRequest(acp.methods.agent.initialize, () => ({
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: { loadSession: false },
      agentInfo: { name: 'svcd-reference-agent', version },
      authMethods: [],
    }))
    .onRequest(acp.methods.agent.session.new, () => ({ sessionId: `ref-${++sessions}` }))
    .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
      running.get(params.sessionId)?.abort();
    })
    .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
      const text = params.prompt
        .map((b) => (b.type === 'text' ? b.text : ''))
        .filter((t) => t !== '')
        .join('\n');
      const abort = new AbortController();
      running.set(params.sessionId, abort);
      const update = (u: acp.SessionUpdate) =>
        client.notify(acp.methods.client.session.update, { sessionId: params.sessionId, update: u });
      try {
        for await (const step of perform(text, { cwd: io.cwd, env: io.env, signal: abort.signal })) {
          switch (step.kind) {
            case 'progress':
              await update({
                sessionUpdate: 'agent_thought_chunk',
                content: { type: 'text', text: `${step.text}\n` },
              });
              break;
            case 'tool_start':
              await update({
                sessionUpdate: 'tool_call',
                toolCallId: step.id,
                title: step.title,
                kind: 'execute',
                status: 'in_progress',
              });
              break;
            case 'tool_end':
              await update({
                sessionUpdate: 'tool_call_update',
                toolCallId: step.id,
                status: step.exitCode === 0 ? 'completed' : 'failed',
                content: [{ type: 'content', content: { type: 'text', text: step.output } }],
              });
              break;
            case 'answer':
              await update({
                sessionUpdate: 'agent_message_chunk',
                content: { type: 'text', text: step.text.endsWith('\n') ? step.text : `${step.text}\n` },
              });
              break;
            case 'fail':
              throw new acp.RequestError(-32000, step.reason);
            case 'exit':
              exitCode = step.code;
              // Crash on request: the reply never comes, as with an agent that dies mid-turn.
              setImmediate(() => process.exit(step.code));
              return await new Promise<never>(() => {});
          }
        }
        return { stopReason: abort.signal.aborted ? 'cancelled' : 'end_turn' };
      } finally {
        running.delete(params.sessionId);
      }
    });
  const conn = app.connect(
    acp.ndJsonStream(
      Writable.toWeb(io.stdout as Writable) as WritableStream<Uint8Array>,
      Readable.toWeb(io.stdin as Readable) as ReadableStream<Uint8Array>,
    ),
  );
  await conn.closed;
  return exitCode ?? 0;
}
