// PTY agents (pty = true): output tap, typed input, resize reaching the terminal, the
// terminal handed over again after a restart — the surface the attach gateway uses.
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTestDaemonContext, type TestDaemonContext } from '../../../test/support/daemon-ctx.js';
import { waitFor } from '../../../test/support/poll.js';
import { psGroup } from '../../../test/support/ps.js';
import { FakeClock } from '../../lib/clock.js';
import { defaultSvcdConfig } from '../config/config.js';
import { createSupervisor, type Supervisor } from './supervisor.js';
import type { AgentTerminal } from './terminal.js';

let t: TestDaemonContext | null = null;
let sup: Supervisor | null = null;
afterEach(async () => {
  await sup?.stop();
  await t?.close();
  sup = null;
  t = null;
});

describe('PTY agents', () => {
  it('taps output, takes input and resizes, and hands the terminal over across a restart', async () => {
    t = await makeTestDaemonContext({ clock: new FakeClock(Date.parse('2025-06-10T10:00:00Z')) });
    writeFileSync(
      t.ctx.paths.agentsToml,
      '[[agent]]\nid = "tty"\nruntime = "alpha_code"\nsupervise = true\npty = true\ncommand = ["svcd", "reference-agent", "--interactive"]\n',
    );
    const config = defaultSvcdConfig();
    config.supervisor.stopGraceMs = 2000;
    sup = createSupervisor(t.ctx, {
      config,
      userBus: false,
    });
    const seen: [string, boolean][] = [];
    sup.onTerminal((id, term) => seen.push([id, term !== null]));
    await sup.start();
    expect(sup.listAgents()[0]).toMatchObject({ id: 'tty', backend: 'process', pty: true, state: 'running' });

    const term = sup.terminal('tty') as AgentTerminal;
    expect(term).not.toBeNull();
    expect([term.cols, term.rows]).toEqual([120, 40]);
    let out = '';
    const off = term.onData((chunk) => {
      out += chunk.toString('utf8');
    });
    term.write('hello tty\r');
    await waitFor('the echo', () => out.includes('echo: hello tty'));

    term.resize(100, 30);
    expect([term.cols, term.rows]).toEqual([100, 30]);
    term.write('run: stty size < /dev/tty\r');
    await waitFor('the new size', () => out.includes('30 100'));

    const r = await sup.signal('tty', 'via signal');
    expect(r).toMatchObject({ delivery: 'pty_input', done: true, ok: true });
    await waitFor('the signalled prompt', () => out.includes('echo: via signal'));
    off();

    const pid = term.pid;
    let exited = false;
    term.onExit(() => {
      exited = true;
    });
    await sup.restartAgent('tty');
    expect(exited).toBe(true);
    expect(psGroup(pid)).toEqual([]);
    const next = sup.terminal('tty') as AgentTerminal;
    expect(next.pid).not.toBe(pid);
    expect(seen).toEqual([
      ['tty', true],
      ['tty', false],
      ['tty', true],
    ]);
    let out2 = '';
    next.onData((c) => {
      out2 += c.toString('utf8');
    });
    next.write('again\r');
    await waitFor('the echo after restart', () => out2.includes('echo: again'));
  });
});

describe('the attachable agent of docs/attach.md', () => {
  it('stays up in its terminal and answers what is typed', async () => {
    const doc = readFileSync(new URL('../../../docs/attach.md', import.meta.url), 'utf8');
    const example = /```toml\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(example, 'the agents.toml example of docs/attach.md').toMatch(/pty = true/);
    t = await makeTestDaemonContext({ clock: new FakeClock(Date.parse('2025-06-10T10:00:00Z')) });
    writeFileSync(t.ctx.paths.agentsToml, example as string);
    const config = defaultSvcdConfig();
    config.supervisor.stopGraceMs = 2000;
    sup = createSupervisor(t.ctx, { config, userBus: false });
    await sup.start();
    const id = sup.listAgents()[0]?.id as string;
    const term = sup.terminal(id) as AgentTerminal;
    let out = '';
    let exited = false;
    term.onData((c) => {
      out += c.toString('utf8');
    });
    term.onExit(() => {
      exited = true;
    });
    term.write('hello attach\r');
    await waitFor('the echo, or the agent exiting', () => out.includes('echo: hello attach') || exited);
    expect(exited).toBe(false);
    expect(sup.listAgents()[0]).toMatchObject({ state: 'running', restarts: 0, pty: true });
  });
});
