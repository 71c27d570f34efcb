// Which node identity file svc and svcd use (docs/operator-guide.md, section 3): an explicit
// SVC_NODE_FILE or SVC_HOME wins over the system file, which wins over ~/.svc only when neither
// is set.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../test/support/tmp.js';
import { nodeFile } from './identity.js';

describe('nodeFile', () => {
  const tmp = makeTempDir('svc-identity-');
  afterEach(() => tmp.remove());
  const setup = (o: { system: boolean; own: boolean; etcWritable: boolean }) => {
    const etc = join(tmp.dir, 'etc-svc');
    const home = join(tmp.dir, 'home', '.svc');
    mkdirSync(etc, { recursive: true });
    mkdirSync(home, { recursive: true });
    if (o.system) writeFileSync(join(etc, 'node.json'), '{}');
    if (o.own) writeFileSync(join(home, 'node.json'), '{}');
    if (!o.etcWritable) chmodSync(etc, 0o500);
    return { system: join(etc, 'node.json'), own: join(home, 'node.json'), home };
  };

  it('prefers SVC_NODE_FILE, then an explicit SVC_HOME, over an existing system file', () => {
    const p = setup({ system: true, own: true, etcWritable: true });
    expect(nodeFile({ SVC_NODE_FILE: '/x/n.json', SVC_HOME: p.home }, p.home, 'read', p.system)).toEqual({
      file: '/x/n.json',
      why: 'SVC_NODE_FILE is set',
    });
    for (const purpose of ['read', 'write'] as const) {
      expect(nodeFile({ SVC_HOME: p.home }, p.home, purpose, p.system)).toEqual({
        file: p.own,
        why: `SVC_HOME is set; ${p.system} is not used`,
      });
    }
  });

  it('reads the system file when neither is set, else the default home, else where register writes', () => {
    let p = setup({ system: true, own: true, etcWritable: true });
    expect(nodeFile({}, p.home, 'read', p.system).file).toBe(p.system);
    tmp.remove();
    p = setup({ system: false, own: true, etcWritable: true });
    expect(nodeFile({}, p.home, 'read', p.system)).toEqual({
      file: p.own,
      why: `no ${p.system}, the identity of the default SVC_HOME`,
    });
    tmp.remove();
    p = setup({ system: false, own: false, etcWritable: true });
    expect(nodeFile({}, p.home, 'read', p.system).file).toBe(p.system);
  });

  it('writes to the system file when its directory is writable, else to the default home', () => {
    let p = setup({ system: false, own: false, etcWritable: true });
    expect(nodeFile({}, p.home, 'write', p.system).file).toBe(p.system);
    tmp.remove();
    p = setup({ system: false, own: false, etcWritable: false });
    // root may write anywhere: only an unprivileged user sees the fallback.
    if (process.getuid?.() !== 0) expect(nodeFile({}, p.home, 'write', p.system).file).toBe(p.own);
  });
});
