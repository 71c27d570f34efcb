// Who sees what on the feed, with a real tower process: a token limited to one domain sees
// only that domain's events whatever its filters ask for, filters narrow further, and
// `svc token revoke` closes the streams open with that token.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStream } from '../support/feed-stream.js';
import { waitFor } from '../support/poll.js';
import { run, SVC_BIN, startTowerProc, stopAll, type TowerProc } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

describe('feed access with a real tower', () => {
  let tmp: ReturnType<typeof makeTempDir>;
  let env: NodeJS.ProcessEnv;
  let tower: TowerProc;

  beforeAll(async () => {
    tmp = makeTempDir('svc-feed-access-');
    env = { SVC_HOME: tmp.dir, SVC_TOKEN: '', SVC_BASE_URL: '' };
    tower = await startTowerProc(env);
    env.SVC_BASE_URL = tower.url;
    env.SVC_TOKEN = readFileSync(join(tmp.dir, 'tower', 'admin.token'), 'utf8').trim();
  });
  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  const svc = async (...args: string[]) => {
    const r = await run(SVC_BIN, ['--json', ...args], env);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };

  it('limits a domain token to its domain, applies filters, and closes its streams on revoke', async () => {
    const a = (await svc('domain', 'create', 'access-a')).id as string;
    const b = (await svc('domain', 'create', 'access-b')).id as string;
    const tok = await svc('token', 'create', '--name', 'a-reader', '--scope', 'feed:read', '--domain', a);
    const token = tok.token as string;

    const everything = openStream(`${tower.url}/events/stream`, token);
    // Asking for domain b (or nothing) never shows b's events to a token of a.
    const askedForB = openStream(`${tower.url}/events/stream?domain_id=${b}`, token);
    await waitFor('the streams to open', () => everything.status() === 200 && askedForB.status() === 200);
    const ma = (await svc('mission', 'create', 'in-a', '--domain', a)).id as string;
    await svc('mission', 'create', 'in-b', '--domain', b);
    const missionOnly = openStream(`${tower.url}/events/stream?mission_id=${ma}&last_event_id=0`, token);
    await svc('mission', 'create', 'in-a-2', '--domain', a);

    await waitFor('both missions of a', () => everything.got.length >= 2);
    await waitFor('the mission filter', () => missionOnly.got.length >= 1);
    expect(everything.got.map((e) => [e.data.domain_id, (e.data.payload as { name: string }).name])).toEqual([
      [a, 'in-a'],
      [a, 'in-a-2'],
    ]);
    expect(missionOnly.got.map((e) => e.data.mission_id)).toEqual([ma]);
    expect(askedForB.got).toEqual([]);

    await svc('token', 'revoke', tok.id as string);
    await waitFor(
      'every stream of the revoked token to close',
      () => everything.ended() && askedForB.ended() && missionOnly.ended(),
    );
    const refused = await fetch(`${tower.url}/events/stream`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(refused.status).toBe(401);
  });
});
