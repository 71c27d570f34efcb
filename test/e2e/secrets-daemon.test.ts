// secrets.sock served by a real svcd process against a real tower: permissions, refusals,
// fuzzing the running daemon, and the leak check over everything the run leaves behind.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BROKER_ERROR_CODES, type BrokerReply } from '../../src/protocol/secrets-socket.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { type Proc, run, SVCD_BIN, type TowerProc } from '../support/procs.js';
import { captureFeed, type FeedCapture } from './feed-capture.js';

const VALUE = 'daemon-e2e-secret-3c5e7a9b1d';

function listFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...listFiles(p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

function ask(path: string, data: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = createConnection(path);
    let text = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      text += d;
    });
    s.on('error', reject);
    s.on('close', () => resolve(text));
    s.on('connect', () => s.end(data));
  });
}

const codeOf = (text: string) => {
  const r = JSON.parse(text) as BrokerReply;
  return r.ok ? 'ok' : r.error.code;
};

describe('secrets.sock in a running svcd', () => {
  let stack: NodeStack;
  let home: string;
  let tower: TowerProc;
  let svcd: Proc;
  let sock: string;
  let domainId: string;
  let feed: FeedCapture;

  beforeAll(async () => {
    stack = await startNodeStack({
      name: 'sd',
      hostname: 'e2e-node',
      svcd: { args: ['--log-level', 'debug'] },
      beforeSvcd: async (s) => {
        feed = captureFeed(s.tower.url, s.adminToken);
        domainId = (JSON.parse(await s.svc(['--json', 'domain', 'create', 'ops'])) as { id: string }).id;
        await s.svc(['secret', 'set', 'DEPLOY_KEY', '--domain', domainId], `${VALUE}\n`);
        await s.svc(['secret', 'grant', 'DEPLOY_KEY', '--domain', domainId, '--agent', 'agt_x']);
      },
    });
    ({ home, tower } = stack);
    svcd = stack.svcd as Proc;
    sock = join(home, 'svcd', 'secrets.sock');
  });
  afterAll(async () => {
    await feed?.stop();
    await stack?.stop();
  });

  it('creates secrets.sock 0600 in a 0700 directory', () => {
    expect((statSync(join(home, 'svcd')).mode & 0o777).toString(8)).toBe('700');
    expect((statSync(sock).mode & 0o777).toString(8)).toBe('600');
  });

  it('refuses a session it never minted, on the socket and through svcd get-secret', async () => {
    const forged = JSON.stringify({ op: 'get', session: 'A'.repeat(43), name: 'DEPLOY_KEY' });
    expect(codeOf(await ask(sock, `${forged}\n`))).toBe('unknown_session');
    const r = await run(SVCD_BIN, ['get-secret', 'DEPLOY_KEY'], {
      SVC_SECRETS_SOCKET: sock,
      SVC_SECRETS_SESSION: 'A'.repeat(43),
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/\[unknown_session\]\n$/);
  });

  it('keeps answering well-formed requests while fuzzed with garbage, huge lines and 500 connections', async () => {
    const wellFormed = `${JSON.stringify({ op: 'get', session: 'B'.repeat(43), name: 'DEPLOY_KEY' })}\n`;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
          fc.nat({ max: wellFormed.length - 2 }).map((n) => wellFormed.slice(0, n)),
          fc.anything().map((v) => JSON.stringify(v) ?? 'null'),
        ),
        async (garbage) => {
          const [bad, good] = await Promise.all([ask(sock, garbage), ask(sock, wellFormed)]);
          expect(BROKER_ERROR_CODES).toContain(codeOf(bad));
          expect(codeOf(good)).toBe('unknown_session');
        },
      ),
      { numRuns: 40 },
    );
    const huge = await ask(sock, Buffer.alloc(10 * 1024 * 1024, 0x7b));
    expect(codeOf(huge)).toBe('bad_request');
    const many = await Promise.all(
      Array.from({ length: 500 }, (_, i) => ask(sock, i % 2 === 0 ? wellFormed : '{"op":')),
    );
    expect(many.map(codeOf)).toEqual(
      Array.from({ length: 500 }, (_, i) => (i % 2 === 0 ? 'unknown_session' : 'bad_request')),
    );
    expect(svcd.child.exitCode).toBeNull();
  });

  it('leaves the value nowhere: files under SVC_HOME, tower database, logs, feed, svcd environment', async () => {
    await waitFor('the feed to carry the grant', () => feed.text().includes('"granted"'));
    expect(feed.text()).not.toContain(VALUE);
    const files = listFiles(home);
    expect(files.some((f) => f.endsWith(join('tower', 'tower.db')))).toBe(true);
    expect(files.some((f) => f.endsWith(join('svcd', 'state.db')))).toBe(true);
    for (const f of files) expect(readFileSync(f).includes(Buffer.from(VALUE)), f).toBe(false);
    for (const log of [tower.stdout(), tower.stderr(), svcd.stdout(), svcd.stderr()])
      expect(log).not.toContain(VALUE);
    const environ = readFileSync(`/proc/${svcd.child.pid}/environ`);
    expect(environ.includes(Buffer.from(VALUE))).toBe(false);
    expect(environ.includes(Buffer.from('SVC_SECRETS_SESSION'))).toBe(false);
  });
});
