// The tower's EdDSA keys for node JWTs. Keys live in the store so every replica signs and
// verifies alike; each has a kid. Rotation adds a key that signs from then on; older keys
// keep verifying until retired.
import { exportJWK, generateKeyPair, importJWK, type JWK, jwtVerify, SignJWT } from 'jose';
import { sql } from 'kysely';
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { SigningKey } from '../../protocol/auth.js';
import { SvcError } from '../../protocol/errors.js';
import { transaction } from '../store/transaction.js';
import type { Db, Dialect, SigningKeyRow } from '../store/types.js';

export const NODE_JWT_ISSUER = 'svc-tower';
export const NODE_JWT_AUDIENCE = 'svc-node';
const ALG = 'EdDSA';
const KEY_LOCK_NS = 0x5e5f;

type KeyLike = Awaited<ReturnType<typeof importJWK>>;

export interface NodeClaims {
  sub: string;
  hostname: string;
  jti: string;
}

export type SigningKeyInfo = SigningKey;

export class SigningKeys {
  private verifyKeys = new Map<string, KeyLike>();
  private signing: { kid: string; key: KeyLike } | null = null;
  /** When the keys were last read from the store (clock ms), and a read under way. */
  private loadedAt = Number.NEGATIVE_INFINITY;
  private loading: Promise<void> | null = null;

  constructor(
    private readonly db: Db,
    private readonly dialect: Dialect,
    private readonly clock: Clock,
  ) {}

  /** Ensures one key exists (creating it under a lock), then loads them all. */
  async init(): Promise<void> {
    await transaction(this.db, async (trx) => {
      if (this.dialect === 'postgres') {
        await sql`select pg_advisory_xact_lock(${KEY_LOCK_NS}, hashtext(current_schema()))`.execute(trx);
      }
      const live = await trx
        .selectFrom('signing_keys')
        .select('kid')
        .where('retired_at', 'is', null)
        .executeTakeFirst();
      if (!live)
        await trx
          .insertInto('signing_keys')
          .values(await this.makeKey())
          .execute();
    });
    await this.load();
  }

  /** Adds a new signing key; returns its kid. */
  async rotate(): Promise<string> {
    const row = await this.makeKey();
    await this.db.insertInto('signing_keys').values(row).execute();
    await this.load();
    return row.kid;
  }

  /** Stops a key from verifying; the newest live key cannot be retired. */
  async retire(kid: string): Promise<void> {
    await this.load();
    if (this.signing?.kid === kid) {
      throw new SvcError('conflict', `key ${kid} is the current signing key: rotate first, then retire it`);
    }
    const res = await this.db
      .updateTable('signing_keys')
      .set({ retired_at: iso(this.clock.now()) })
      .where('kid', '=', kid)
      .where('retired_at', 'is', null)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1) throw new SvcError('not_found', `no live signing key ${kid}`);
    await this.load();
  }

  async list(): Promise<SigningKeyInfo[]> {
    const rows = await this.db
      .selectFrom('signing_keys')
      .select(['kid', 'alg', 'created_at', 'retired_at'])
      .orderBy('created_at')
      .execute();
    await this.load();
    return rows.map((r) => ({ ...r, active: r.kid === this.signing?.kid }));
  }

  async signNode(claims: NodeClaims): Promise<string> {
    if (!this.signing) await this.load();
    const s = this.signing;
    if (!s) throw new SvcError('internal', 'no signing key available');
    return new SignJWT({ hostname: claims.hostname })
      .setProtectedHeader({ alg: ALG, kid: s.kid, typ: 'JWT' })
      .setSubject(claims.sub)
      .setJti(claims.jti)
      .setIssuer(NODE_JWT_ISSUER)
      .setAudience(NODE_JWT_AUDIENCE)
      .setIssuedAt(Math.floor(this.clock.now() / 1000))
      .sign(s.key);
  }

  /**
   * Verifies a node JWT's signature and claims; throws unauthenticated otherwise. With
   * `maxKeyAgeMs`, the keys are first re-read if older than that, so a key retired on
   * another replica stops verifying here too (re-checks of open channels ask for this).
   */
  async verifyNode(jwt: string, opts: { maxKeyAgeMs?: number } = {}): Promise<NodeClaims> {
    if (opts.maxKeyAgeMs !== undefined) await this.freshen(opts.maxKeyAgeMs);
    try {
      const { payload } = await jwtVerify(
        jwt,
        async (header) => {
          const kid = header.kid ?? '';
          let key = this.verifyKeys.get(kid);
          if (!key) {
            await this.load(); // another replica may have rotated
            key = this.verifyKeys.get(kid);
          }
          if (!key) throw new Error(`unknown key id ${kid}`);
          return key;
        },
        {
          issuer: NODE_JWT_ISSUER,
          audience: NODE_JWT_AUDIENCE,
          algorithms: [ALG],
          currentDate: new Date(this.clock.now()),
        },
      );
      if (
        typeof payload.sub !== 'string' ||
        typeof payload.jti !== 'string' ||
        typeof payload.hostname !== 'string'
      ) {
        throw new Error('missing claims');
      }
      return { sub: payload.sub, jti: payload.jti, hostname: payload.hostname };
    } catch (e) {
      throw new SvcError('unauthenticated', `invalid node token: ${(e as Error).message}`);
    }
  }

  private async makeKey(): Promise<SigningKeyRow> {
    const { publicKey, privateKey } = await generateKeyPair(ALG, { crv: 'Ed25519', extractable: true });
    const kid = newId('key', this.clock.now());
    return {
      kid,
      alg: ALG,
      public_jwk: JSON.stringify({ ...(await exportJWK(publicKey)), kid }),
      private_jwk: JSON.stringify({ ...(await exportJWK(privateKey)), kid }),
      created_at: iso(this.clock.now()),
      retired_at: null,
    };
  }

  /** Re-reads the keys when the last read is `maxAgeMs` old or more (re-checks of open
   * channels: a key retired on another replica stops verifying here too). */
  async freshen(maxAgeMs: number): Promise<void> {
    if (this.clock.now() - this.loadedAt >= maxAgeMs) await this.refresh();
  }

  /** Whether node tokens signed with `kid` still verify, as of the last read of the keys. */
  isActive(kid: string): boolean {
    return this.verifyKeys.has(kid);
  }

  /** load() for re-checks: concurrent callers share one read. */
  private refresh(): Promise<void> {
    this.loading ??= this.load().finally(() => {
      this.loading = null;
    });
    return this.loading;
  }

  private async load(): Promise<void> {
    const startedAt = this.clock.now();
    const rows = await this.db
      .selectFrom('signing_keys')
      .selectAll()
      .where('retired_at', 'is', null)
      .orderBy('created_at')
      .orderBy('kid')
      .execute();
    const verify = new Map<string, KeyLike>();
    let newest: SigningKeyRow | undefined;
    for (const r of rows) {
      verify.set(r.kid, await importJWK(JSON.parse(r.public_jwk) as JWK, ALG));
      newest = r;
    }
    this.verifyKeys = verify;
    this.signing = newest
      ? { kid: newest.kid, key: await importJWK(JSON.parse(newest.private_jwk) as JWK, ALG) }
      : null;
    this.loadedAt = startedAt;
  }
}
