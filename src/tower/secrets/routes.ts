// HTTP routes of secrets (docs/secrets.md): operators set, list, grant and revoke (values are
// write-only), nodes fetch on behalf of an enrolled agent, admins rotate the master key.
// Every fetch, granted or refused, is audited as a `matrix` event without the value.
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import { MAX_SECRET_VALUE_BYTES, type SecretFetched } from '../../protocol/secrets.js';
import type { Principal } from '../auth/principal.js';
import type { TowerApp } from '../http/app.js';
import { requireDomain } from '../records/access.js';
import { decodeCursor, encodeCursor } from '../records/cursor.js';
import type { Store } from '../store/open.js';
import type { Tx, Write } from '../store/tx.js';
import { type AgentLookup, agentsTableLookup } from './agents.js';
import {
  claimKeyForWrite,
  type MasterKeys,
  masterKeyStatus,
  openMasterKeys,
  rotateMasterKey,
  usableKeyring,
} from './key-rotation.js';
import { secretSchemas } from './schemas.js';
import {
  deleteSecret,
  describeSecret,
  describeSecrets,
  fetchForAgent,
  grantSecret,
  putSecret,
  requireSecret,
  revokeSecret,
  rollbackSecret,
  sdb,
} from './store.js';

/** What the secrets routes use besides their options. */
export interface SecretRoutesDeps extends SecretRoutesOptions {
  clock: Clock;
  log: Logger;
  store: Store;
  write: Write;
  /** Where <data-dir>/master.key lives. */
  dataDir: string;
}

export interface SecretRoutesOptions {
  /** Text of SVC_MASTER_KEY, read at the CLI edge; otherwise <data-dir>/master.key. */
  masterKey?: string;
  /** Where agent enrolment is looked up (default: the agents table). */
  agents?: AgentLookup;
}

/** Who made a change, as stored on versions and grants. */
const actorOf = (p: Principal): string => p.id;

function requireOperator(p: Principal): void {
  if (p.kind === 'node') {
    throw new SvcError(
      'forbidden',
      'nodes cannot manage secrets: use an operator token with the admin scope',
    );
  }
}

function requireGlobalAdmin(p: Principal): void {
  if (p.domains !== null) {
    throw new SvcError(
      'forbidden',
      'the master key is tower-wide: use an admin token that is not limited to domains',
    );
  }
}

export const secretRoutes = fp(
  async (app: TowerApp, deps: SecretRoutesDeps) => {
    const log = deps.log.child({ component: 'secrets' });
    const keyDeps = { db: deps.store.db, dialect: deps.store.dialect, clock: deps.clock, log };
    const mk = await openMasterKeys(keyDeps, {
      dataDir: deps.dataDir,
      ...(deps.masterKey !== undefined ? { masterKey: deps.masterKey } : {}),
    });
    registerSecretRoutes(app, deps, mk, deps.agents ?? agentsTableLookup);
    app.get(
      '/admin/master-key',
      { config: { scope: 'admin', towerWide: true }, schema: secretSchemas.masterKey },
      async (req) => {
        requireGlobalAdmin(req.principal);
        return masterKeyStatus(deps.store.db, mk);
      },
    );
    app.post(
      '/admin/master-key/rotate',
      { config: { scope: 'admin', towerWide: true }, schema: secretSchemas.rotateMasterKey },
      async (req) => {
        requireGlobalAdmin(req.principal);
        return rotateMasterKey(keyDeps, mk);
      },
    );
  },
  { name: 'svc-secrets' },
);

function registerSecretRoutes(
  app: TowerApp,
  deps: SecretRoutesDeps,
  mk: MasterKeys,
  agents: AgentLookup,
): void {
  const db = () => sdb(deps.store.db);
  /** Seals within a write whose key is checked against the database's key first. */
  const claim = (tx: Tx, keyId: string) => claimKeyForWrite(tx, deps.store.dialect, deps.clock, mk, keyId);
  /** The secret's domain (?domain_id=), once the caller is known to be an operator who sees it. */
  const domainOf = async (req: FastifyRequest, query: { domain_id: string }): Promise<string> => {
    requireOperator(req.principal);
    await requireDomain(deps.store.db, req.principal, query.domain_id);
    return query.domain_id;
  };

  app.get('/secrets', { config: { scope: 'admin' }, schema: secretSchemas.list }, async (req) => {
    requireOperator(req.principal);
    const q = req.query;
    const limit = q.limit ?? 100;
    const after = decodeCursor(q.cursor);
    const p = req.principal;
    if (q.domain_id !== undefined) await requireDomain(deps.store.db, p, q.domain_id);
    if (p.domains !== null && p.domains.length === 0) return { items: [], next_cursor: null };
    let query = db()
      .selectFrom('secrets')
      .selectAll()
      .orderBy('id')
      .limit(limit + 1);
    if (after !== null) query = query.where('id', '>', after);
    if (q.domain_id !== undefined) query = query.where('domain_id', '=', q.domain_id);
    else if (p.domains !== null) query = query.where('domain_id', 'in', p.domains);
    const rows = await query.execute();
    const more = rows.length > limit;
    const page = more ? rows.slice(0, limit) : rows;
    return {
      items: await describeSecrets(db(), page),
      next_cursor: more && page.length > 0 ? encodeCursor(page[page.length - 1]!.id) : null,
    };
  });

  app.get('/secrets/:name', { config: { scope: 'admin' }, schema: secretSchemas.get }, async (req) => {
    const domainId = await domainOf(req, req.query);
    return describeSecret(db(), await requireSecret(db(), domainId, req.params.name));
  });

  app.put('/secrets/:name', { config: { scope: 'admin' }, schema: secretSchemas.put }, async (req, reply) => {
    const domainId = await domainOf(req, req.query);
    const body = req.body;
    if (Buffer.byteLength(body.value, 'utf8') > MAX_SECRET_VALUE_BYTES) {
      throw new SvcError(
        'validation_failed',
        `body/value: must be at most ${MAX_SECRET_VALUE_BYTES} bytes of UTF-8`,
        {
          errors: [{ field: 'body/value', message: `must be at most ${MAX_SECRET_VALUE_BYTES} bytes` }],
        },
      );
    }
    const { row, created } = await usableKeyring(mk).withCurrent((sealer) =>
      deps.write(async (tx) => {
        await claim(tx, sealer.keyId);
        return putSecret(tx, sealer, {
          domainId,
          name: req.params.name,
          value: body.value,
          ...(body.description !== undefined ? { description: body.description } : {}),
          actor: actorOf(req.principal),
        });
      }),
    );
    return reply.code(created ? 201 : 200).send(await describeSecret(db(), row));
  });

  app.delete(
    '/secrets/:name',
    { config: { scope: 'admin' }, schema: secretSchemas.delete },
    async (req, reply) => {
      const domainId = await domainOf(req, req.query);
      await deps.write((tx) => deleteSecret(tx, domainId, req.params.name));
      return reply.code(204).send();
    },
  );

  app.post(
    '/secrets/:name/rollback',
    { config: { scope: 'admin' }, schema: secretSchemas.rollback },
    async (req) => {
      const domainId = await domainOf(req, req.query);
      const keyring = usableKeyring(mk);
      const row = await keyring.withCurrent((sealer) =>
        deps.write(async (tx) => {
          await claim(tx, sealer.keyId);
          return rollbackSecret(tx, sealer, keyring, {
            domainId,
            name: req.params.name,
            version: req.body.version,
            actor: actorOf(req.principal),
          });
        }),
      );
      return describeSecret(db(), row);
    },
  );

  app.post(
    '/secrets/:name/grants',
    { config: { scope: 'admin' }, schema: secretSchemas.grant },
    async (req, reply) => {
      const domainId = await domainOf(req, req.query);
      const agentId = req.body.agent_id;
      // Granting ahead of enrolment is allowed; granting to an agent of another domain is a mistake.
      const agent = await agents(deps.store.db, agentId);
      if (agent && agent.domain_id !== domainId) {
        throw new SvcError(
          'conflict',
          `agent ${agentId} is enrolled in domain ${agent.domain_id}, not ${domainId}: it can only be granted secrets of its own domain`,
        );
      }
      const { grant, created } = await deps.write((tx) =>
        grantSecret(tx, { domainId, name: req.params.name, agentId, actor: actorOf(req.principal) }),
      );
      return reply.code(created ? 201 : 200).send(grant);
    },
  );

  app.delete(
    '/secrets/:name/grants/:agent_id',
    { config: { scope: 'admin' }, schema: secretSchemas.revoke },
    async (req, reply) => {
      const domainId = await domainOf(req, req.query);
      const { name, agent_id: agentId } = req.params;
      await deps.write((tx) => revokeSecret(tx, { domainId, name, agentId }));
      return reply.code(204).send();
    },
  );

  app.post(
    '/secrets/:name/fetch',
    { config: { scope: 'work:write' }, schema: secretSchemas.fetch },
    async (req, reply) => {
      const p = req.principal;
      if (p.kind !== 'node' || !p.nodeId) {
        throw new SvcError(
          'forbidden',
          'only node credentials fetch secret values (svcd on behalf of its agents); operators cannot read values back',
        );
      }
      const nodeId = p.nodeId;
      const name = req.params.name;
      const agentId = req.body.agent_id;
      const agent = await agents(deps.store.db, agentId);
      const enrolledHere = agent !== null && agent.node_id === nodeId;
      const outcome = await deps.write(async (tx) => {
        const audit = (domainId: string | null, action: string, extra: Record<string, unknown>) =>
          tx.emit({
            type: 'matrix',
            domain_id: domainId,
            agent_id: agentId,
            payload: { entity: 'secret', action, name, node_id: nodeId, node: p.name, ...extra },
          });
        if (!agent || !enrolledHere) {
          const error = new SvcError('agent_not_found', `agent ${agentId} is not enrolled on this node`);
          audit(null, 'fetch_refused', { reason: error.code });
          return { ok: false as const, error };
        }
        const r = await fetchForAgent(sdb(tx.db), usableKeyring(mk), {
          domainId: agent.domain_id,
          name,
          agentId,
        });
        if (r.ok) audit(agent.domain_id, 'fetched', { id: r.secret.id, version: r.version });
        else audit(agent.domain_id, 'fetch_refused', { reason: r.error.code });
        return r;
      });
      if (!outcome.ok) throw outcome.error;
      const body: SecretFetched = {
        name,
        domain_id: outcome.secret.domain_id,
        version: outcome.version,
        value: outcome.value,
      };
      return reply.header('cache-control', 'no-store').send(body);
    },
  );
}
