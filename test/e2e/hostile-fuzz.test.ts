// Property-based hostile input (fast-check) on every socket and WebSocket of a real tower and a
// real svcd: arbitrary JSON values and byte strings on the tower's /nodes/connect,
// /nodes/attach/{id}, /events/ws and /api/attach-ws, and on svcd's mgmt.sock, secrets.sock,
// svcd.sock (attach) and the fan-out listener. After each input the process must still be up
// and still answer: the tower /healthz and a real request, svcd mgmt.sock daemon.status.
// Terminal input (binary attach frames) is kept to printable bytes: a ^C or ^D is a legitimate
// way to end the agent, which is not what this tests.
import { readFileSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { CONTROL_PATH } from '../../src/protocol/control.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { run, SVC_BIN, SVCD_BIN } from '../support/procs.js';

let stack: NodeStack;
let agentId: string;
let fanout: { listen: string; token: string };
/** A second node, for the control channel fuzz (svcd keeps the first node's channel). */
let other: { id: string; jwt: string };

beforeAll(async () => {
  stack = await startNodeStack({
    name: 'fuzz',
    hostname: 'fuzz-node',
    svcd: { args: ['--log-level', 'warn'] },
    svcdFiles: { 'config.toml': '[fanout]\nenable = true\nlisten = "127.0.0.1:0"\n' },
    beforeSvcd: async (s) => {
      const { domainId } = await s.mission('fuzz', 'm');
      agentId = await s.enrol(domainId, 'tty');
      writeFileSync(
        join(s.home, 'svcd', 'agents.toml'),
        `[[agent]]\nid = "${agentId}"\nruntime = "alpha_code"\nsupervise = true\npty = true\ncommand = ["node", ${JSON.stringify(SVCD_BIN)}, "reference-agent", "--interactive"]\n`,
      );
    },
  });
  const status = await waitFor(
    'the fan-out and the PTY agent',
    async () => {
      const f = await mgmtCall<{ upstream: { state: string }; listen: string; token_file: string }>(
        stack.mgmtSock,
        'fanout.status',
      );
      const r = await run(SVC_BIN, ['--json', 'agent', 'supervise', 'list'], stack.cli);
      const running =
        r.code === 0 &&
        (JSON.parse(r.stdout) as { items: { id: string; state: string }[] }).items.some(
          (a) => a.id === agentId && a.state === 'running',
        );
      return f.upstream.state === 'up' && running ? f : null;
    },
    { timeoutMs: 90_000 },
  );
  fanout = { listen: status.listen, token: readFileSync(status.token_file, 'utf8').trim() };
  const res = await stack.admin('POST', '/nodes', { hostname: 'fuzz-other' });
  other = (await res.json()) as { id: string; jwt: string };
});
afterAll(async () => {
  await stack?.stop();
});

/** Arbitrary input for a WebSocket: JSON values as text frames, bytes as text (maybe not UTF-8) or binary. */
const wsInput = fc.oneof(
  fc.jsonValue().map((v) => ({ data: JSON.stringify(v) ?? 'null', binary: false })),
  fc.uint8Array({ maxLength: 512 }).map((b) => ({ data: Buffer.from(b), binary: false })),
  fc.uint8Array({ maxLength: 512 }).map((b) => ({ data: Buffer.from(b), binary: true })),
  fc.string({ maxLength: 200 }).map((s) => ({ data: s, binary: false })),
);
/** The same, with binary frames kept printable (attach: binary frames are terminal input). */
const attachInput = wsInput.map((i) =>
  i.binary ? { ...i, data: Buffer.from((i.data as Buffer).filter((b) => b >= 0x20 && b < 0x7f)) } : i,
);
/** Arbitrary lines for a stream socket: JSON values and raw bytes, newline-ended. */
const lineInput = fc.oneof(
  fc.jsonValue().map((v) => Buffer.from(`${JSON.stringify(v) ?? 'null'}\n`)),
  fc.uint8Array({ maxLength: 1024 }).map((b) => Buffer.concat([Buffer.from(b), Buffer.from('\n')])),
);

/** Both processes up and answering. */
async function bothAnswer(): Promise<void> {
  expect(stack.tower.child.exitCode).toBeNull();
  expect(stack.svcd?.child.exitCode).toBeNull();
  expect((await fetch(`${stack.tower.url}/healthz`)).status).toBe(200);
  expect((await stack.admin('GET', '/tokens')).status).toBe(200);
  const s = await mgmtCall<{ node_id: string }>(stack.mgmtSock, 'daemon.status');
  expect(s.node_id).toBe(stack.node.node_id);
}

/** Opens a WebSocket, sends one input, waits until it closes or the input is taken, then closes it. */
async function sendOnce(
  url: string,
  headers: Record<string, string>,
  input: { data: string | Buffer; binary: boolean },
  opts: WebSocket.ClientOptions = {},
): Promise<void> {
  const ws = new WebSocket(url, { headers, ...opts });
  ws.on('error', () => {});
  const closed = new Promise<void>((r) => ws.on('close', () => r()));
  const opened = await new Promise<boolean>((r) => {
    ws.once('open', () => r(true));
    ws.once('close', () => r(false));
  });
  if (opened) {
    await new Promise<void>((r) => ws.send(input.data, { binary: input.binary }, () => r()));
    // A round trip: a ping answered after the frame means the receiver has handled it.
    const pong = new Promise<void>((r) => ws.once('pong', () => r()));
    if (ws.readyState === WebSocket.OPEN) ws.ping();
    await Promise.race([closed, pong]);
    ws.close();
  }
  await closed;
}

/** Writes bytes to a stream socket (unix path or host:port) and reads until it closes or goes quiet. */
function sendRaw(target: { path: string } | { host: string; port: number }, data: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const s = createConnection(target as never);
    s.on('error', () => resolve());
    s.on('close', () => resolve());
    s.on('data', () => {});
    s.on('connect', () => {
      s.write(data);
      s.end();
    });
  });
}

const wsBase = () => stack.tower.url.replace(/^http/, 'ws');
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const RUNS = { numRuns: 25 };

describe('hostile input on the tower', () => {
  it('survives anything on /nodes/connect', async () => {
    await fc.assert(
      fc.asyncProperty(wsInput, async (input) => {
        await sendOnce(wsBase() + CONTROL_PATH, bearer(other.jwt), input);
        await bothAnswer();
      }),
      RUNS,
    );
  });

  it('survives anything on /nodes/attach/{id}', async () => {
    await fc.assert(
      fc.asyncProperty(wsInput, fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/), async (input, id) => {
        await sendOnce(`${wsBase()}/nodes/attach/${id}`, bearer(stack.node.jwt), input);
        await bothAnswer();
      }),
      RUNS,
    );
  });

  it('survives anything on /events/ws', async () => {
    await fc.assert(
      fc.asyncProperty(wsInput, async (input) => {
        await sendOnce(`${wsBase()}/events/ws`, bearer(stack.adminToken), input);
        await bothAnswer();
      }),
      RUNS,
    );
  });

  it('survives anything on /api/attach-ws, through to the node', async () => {
    const path = `${wsBase()}/api/attach-ws?node=${stack.node.node_id}&agent=${agentId}`;
    await fc.assert(
      fc.asyncProperty(attachInput, async (input) => {
        await sendOnce(path, bearer(stack.adminToken), input);
        await bothAnswer();
      }),
      { numRuns: 15 },
    );
  });

  it('survives raw bytes on its HTTP port', async () => {
    const u = new URL(stack.tower.url);
    await fc.assert(
      fc.asyncProperty(lineInput, async (data) => {
        await sendRaw({ host: u.hostname, port: Number(u.port) }, data);
        await bothAnswer();
      }),
      RUNS,
    );
  });
});

describe('hostile input on svcd', () => {
  it('survives anything on mgmt.sock', async () => {
    await fc.assert(
      fc.asyncProperty(lineInput, async (data) => {
        await sendRaw({ path: stack.mgmtSock }, data);
        await bothAnswer();
      }),
      RUNS,
    );
  });

  it('survives anything on secrets.sock, answering bad_request or unknown_session', async () => {
    const sock = join(stack.home, 'svcd', 'secrets.sock');
    await fc.assert(
      fc.asyncProperty(lineInput, async (data) => {
        const reply = await new Promise<string>((resolve) => {
          let out = '';
          const s = createConnection(sock);
          s.setEncoding('utf8');
          s.on('data', (d: string) => {
            out += d;
          });
          s.on('error', () => resolve(out));
          s.on('close', () => resolve(out));
          s.on('connect', () => s.end(data));
        });
        const r = JSON.parse(reply) as { ok: boolean; error?: { code: string } };
        expect(r.ok).toBe(false);
        expect(['bad_request', 'unknown_session']).toContain(r.error?.code);
        await bothAnswer();
      }),
      RUNS,
    );
  });

  it('survives anything on svcd.sock (local attach) and raw bytes on it', async () => {
    const sock = join(stack.home, 'svcd', 'svcd.sock');
    await fc.assert(
      fc.asyncProperty(attachInput, lineInput, async (input, raw) => {
        await sendOnce(`ws+unix://${sock}:/attach?agent=${agentId}`, {}, input);
        await sendRaw({ path: sock }, raw);
        await bothAnswer();
      }),
      { numRuns: 15 },
    );
  });

  it('survives anything on the fan-out listener, WebSocket and raw', async () => {
    const u = new URL(fanout.listen);
    await fc.assert(
      fc.asyncProperty(wsInput, lineInput, async (input, raw) => {
        await sendOnce(`ws://${u.host}/events/ws`, bearer(fanout.token), input);
        await sendRaw({ host: u.hostname, port: Number(u.port) }, raw);
        await bothAnswer();
      }),
      RUNS,
    );
  });
});
