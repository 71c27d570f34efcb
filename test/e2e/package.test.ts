// The package a user installs: `npm pack` of the built tree, `npm install -g` of the tarball
// into a clean prefix (production dependencies only, from the npm cache: --prefer-offline), and
// the installed `svc` and `svcd` run a tower and a node connected to it. Also what a clone does:
// `npm install --omit=dev` succeeds, and `npx svc` runs the project's own bin, not the unrelated
// `svc` package on the registry.
import { execFile } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { waitFor } from '../support/poll.js';
import { isolatedEnv, spawnProc, stopAll } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

const ROOT = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  dependencies: Record<string, string>;
};
// npm, and the scripts it runs, on this Node.
const PATH = `${dirname(process.execPath)}:${process.env.PATH}`;
const exec = promisify(execFile);

/** Runs npm in `cwd`; the npm cache is the user's, so packages come from it when they are there. */
async function npm(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) {
  return exec('npm', [...args, '--no-audit', '--no-fund', '--no-update-notifier'], {
    cwd,
    env: { ...process.env, PATH, ...env },
    maxBuffer: 64 * 1024 * 1024,
  });
}

describe('the installable package', () => {
  const tmp = makeTempDir('svc-e2e-package-');
  const prefix = join(tmp.dir, 'prefix');
  const installed = join(prefix, 'lib', 'node_modules', pkg.name);
  let files: string[] = [];

  beforeAll(async () => {
    // The tree npm test just built (dist/): packing must not build it again under the other
    // tests, which run it.
    const packed = await npm(['pack', '--ignore-scripts', '--json', '--pack-destination', tmp.dir], ROOT);
    const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
    if (!info) throw new Error(`npm pack said: ${packed.stdout}`);
    files = info.files.map((f) => f.path).sort();
    await npm(
      ['install', '-g', '--prefix', prefix, '--prefer-offline', join(tmp.dir, info.filename)],
      tmp.dir,
    );
  });
  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  it('carries what runs: dist without source maps, the console, docs text, README, LICENSE', () => {
    const docs = readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`)
      .sort();
    expect(files.filter((f) => !f.startsWith('dist/'))).toEqual([
      'LICENSE',
      'README.md',
      ...docs,
      'package.json',
      'scripts/check-node.cjs',
    ]);
    expect(files.filter((f) => f.endsWith('.map') || f.endsWith('.ts') || f.endsWith('.test.js'))).toEqual(
      [],
    );
    for (const f of ['dist/cli/svc.js', 'dist/cli/svcd.js', 'dist/console/index.html'])
      expect(files).toContain(f);
  });

  it('installs with production dependencies only', () => {
    const modules = join(installed, 'node_modules');
    for (const dep of Object.keys(pkg.dependencies)) expect(existsSync(join(modules, dep)), dep).toBe(true);
    for (const dev of ['typescript', 'vite', 'vitest', '@biomejs/biome', 'pm2', 'playwright-core'])
      expect(existsSync(join(modules, dev)), dev).toBe(false);
  });

  it('gives a svc and a svcd that run a tower and a node connected to it', async () => {
    const bin = join(prefix, 'bin');
    // The bin links run as commands (shebang and mode).
    for (const cmd of ['svc', 'svcd']) {
      const { stdout } = await exec(join(bin, cmd), ['--version'], { env: { ...process.env, PATH } });
      expect(stdout.trim()).toBe(pkg.version);
    }
    const env: NodeJS.ProcessEnv = { ...isolatedEnv(tmp.dir), PATH };
    const tower = spawnProc(
      join(bin, 'svc'),
      ['tower', 'serve', '--listen', '127.0.0.1:0', '--log-level', 'warn'],
      env,
    );
    const url = await waitFor(
      'the installed tower to listen',
      () => /listening on (\S+)/.exec(tower.stdout())?.[1],
      {
        timeoutMs: 90_000,
      },
    );
    const home = env.SVC_HOME as string;
    const token = readFileSync(join(home, 'tower', 'admin.token'), 'utf8').trim();
    // The console ships built.
    const page = await fetch(`${url}/`);
    expect([page.status, (await page.text()).includes('<div id="app">')]).toEqual([200, true]);

    const cli = { ...env, SVC_BASE_URL: url, SVC_TOKEN: token };
    const register = spawnProc(join(bin, 'svc'), ['agent', 'node', 'register', '--hostname', 'pkg'], cli);
    expect(await register.exited, register.stderr()).toBe(0);
    spawnProc(join(bin, 'svcd'), ['run', '--log-level', 'warn'], cli);
    const sock = join(home, 'svcd', 'mgmt.sock');
    await waitFor(
      'the installed svcd connected to the tower',
      async () =>
        ((await mgmtCall(sock, 'daemon.status')) as { tower: { connected: boolean } }).tower.connected,
      { timeoutMs: 90_000 },
    );
  });
});

describe('a clone of the project', () => {
  const tmp = makeTempDir('svc-e2e-clone-');
  afterAll(() => tmp.remove());

  it('installs with --omit=dev, skipping the build it has no tools for', async () => {
    const clone = join(tmp.dir, 'clone');
    for (const f of ['package.json', 'package-lock.json', '.npmrc', 'scripts'])
      cpSync(join(ROOT, f), join(clone, f), { recursive: true });
    const { stderr } = await npm(
      ['install', '--omit=dev', '--prefer-offline', '--foreground-scripts'],
      clone,
    );
    expect(stderr).toContain('dev dependencies not installed (--omit=dev), so dist/ is not built');
    expect(existsSync(join(clone, 'node_modules', 'typescript'))).toBe(false);
  });

  it('runs its own svc with npx, not the registry’s package of that name', async () => {
    // An empty npm cache and --offline: the registry's `svc` cannot be fetched. --ignore-scripts:
    // npx links the project into its cache and would run `prepare` (a build under the other tests).
    const { stdout } = await npm(['exec', '--offline', '--ignore-scripts', '--', 'svc', '--version'], ROOT, {
      npm_config_cache: join(tmp.dir, 'npm-cache'),
    });
    expect(stdout.trim()).toBe(pkg.version);
  });
});
