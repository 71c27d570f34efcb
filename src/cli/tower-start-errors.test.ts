// What `svc tower serve` says when its store or address is not usable: one line with the
// cause and what to do, the password of the database URL never shown; a bug passes through.
import { describe, expect, it } from 'vitest';
import { SvcError } from '../protocol/errors.js';
import { listenError, redactDatabaseUrl, storeOpenError } from './tower-start-errors.js';

const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });

describe('storeOpenError', () => {
  const url = 'postgres://svc:s3cret@db.example:5432/svc?schema=t1';
  const shown = 'postgres://svc@db.example:5432/svc?schema=t1';

  it('hides the password of a database URL', () => {
    expect(redactDatabaseUrl(url)).toBe(shown);
    expect(redactDatabaseUrl('postgres://root@127.0.0.1:1/test')).toBe('postgres://root@127.0.0.1:1/test');
    expect(redactDatabaseUrl('postgres://u:p@[::1')).toBe('postgres://u@[::1');
  });

  it.each([
    [
      'refused',
      pgError('ECONNREFUSED', 'connect ECONNREFUSED 10.0.0.1:5432'),
      'unavailable',
      'cannot reach the database',
    ],
    [
      'refused on every address',
      Object.assign(new AggregateError([pgError('ECONNREFUSED', 'connect ECONNREFUSED ::1:5432')], ''), {
        code: 'ECONNREFUSED',
      }),
      'unavailable',
      'cannot reach the database',
    ],
    ['unknown host', pgError('ENOTFOUND', 'getaddrinfo ENOTFOUND db.example'), 'unavailable', 'cannot reach'],
    ['connect timeout', new Error('timeout exceeded when trying to connect'), 'unavailable', 'cannot reach'],
    ['starting up', pgError('57P03', 'the database system is starting up'), 'unavailable', 'cannot reach'],
    ['missing database', pgError('3D000', 'database "svc" does not exist'), 'config_invalid', 'createdb'],
    [
      'wrong password',
      pgError('28P01', 'password authentication failed for user "svc"'),
      'config_invalid',
      'refused the login',
    ],
  ])('%s: one line, code %s', (_what, err, code, text) => {
    const e = storeOpenError(err, url, '/d') as SvcError;
    expect(e).toBeInstanceOf(SvcError);
    expect(e.code).toBe(code);
    expect(e.message).toContain(text);
    expect(e.message).toContain(shown);
    expect(e.message).not.toContain('s3cret');
    expect(e.message).not.toContain('\n');
  });

  it('names the SQLite directory it cannot open, and the unsupported URL', () => {
    const e = storeOpenError(
      pgError('EACCES', "EACCES: permission denied, mkdir '/srv/t'"),
      undefined,
      '/srv/t',
    );
    expect(e).toMatchObject({
      code: 'config_invalid',
      message: `cannot open the SQLite store in /srv/t: EACCES: permission denied, mkdir '/srv/t' (check --data-dir and its permissions)`,
    });
    const u = storeOpenError(
      new Error('unsupported --database "mysql://x": use postgres://… or omit it for SQLite'),
      'mysql://x',
      '/d',
    );
    expect(u).toMatchObject({ code: 'config_invalid' });
  });

  it('lets anything else through unchanged (a bug keeps its stack)', () => {
    const bug = new TypeError('x is not a function');
    expect(storeOpenError(bug, url, '/d')).toBe(bug);
    expect(storeOpenError(bug, undefined, '/d')).toBe(bug);
    const svc = new SvcError('config_invalid', 'master key file is readable by others');
    expect(storeOpenError(svc, undefined, '/d')).toBe(svc);
  });
});

describe('listenError', () => {
  it('says what to do about an address in use', () => {
    expect(listenError('127.0.0.1:8008', pgError('EADDRINUSE', 'listen EADDRINUSE')).message).toBe(
      'cannot listen on 127.0.0.1:8008: the address is in use (EADDRINUSE): another tower or program holds it; stop it or choose another --listen address',
    );
  });
});
