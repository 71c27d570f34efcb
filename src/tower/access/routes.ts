// Administration of credentials: service tokens, the tower's signing keys, and node
// registration (which mints node JWTs).
import fp from 'fastify-plugin';
import { newId, randomToken } from '../../lib/ids.js';
import { SvcError } from '../../protocol/errors.js';
import type { Node } from '../../protocol/nodes.js';
import type { Authenticator } from '../auth/authenticate.js';
import { coversDomains, grantRefusal, type Principal } from '../auth/principal.js';
import type { SigningKeys } from '../auth/signing-keys.js';
import { insertToken, listTokens, revokeToken } from '../auth/tokens.js';
import type { TowerApp } from '../http/app.js';
import type { Store } from '../store/open.js';
import type { Write } from '../store/tx.js';
import type { NodeRow } from '../store/types.js';
import { credentialSchemas } from './schemas.js';

/**
 * Which of these nodes are online, on any replica (nodes/presence.ts); default: none. Decided
 * by the nodes area, which this one does not import.
 */
export type NodePresence = (nodeIds: string[]) => Promise<Set<string>>;

export function nodeFromRow(r: NodeRow, online: boolean): Node {
  return {
    id: r.id,
    hostname: r.hostname,
    domains: r.domains === null ? null : (JSON.parse(r.domains) as string[]),
    online,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

/** May principal p take over (re-register) a node with these domains? Only if it sees them all. */
function coversNode(p: Principal, nodeDomains: string[] | null): boolean {
  return coversDomains(p, nodeDomains);
}

/** What the credential routes use. */
export interface CredentialRoutesDeps {
  store: Store;
  write: Write;
  auth: Authenticator;
  keys: SigningKeys;
  presence?: NodePresence;
}

export const credentialRoutes = fp(
  async (app: TowerApp, deps: CredentialRoutesDeps) => {
    const presence: NodePresence = deps.presence ?? (async () => new Set());
    app.post(
      '/tokens',
      { config: { scope: 'admin' }, schema: credentialSchemas.createToken },
      async (req, reply) => {
        const body = req.body;
        // Grants never widen: scopes and domains within the creator's own.
        const refusal = grantRefusal(req.principal, body.scopes, body.domains ?? null);
        if (refusal) throw new SvcError('forbidden', refusal);
        const created = await deps.write((tx) => insertToken(tx, body));
        return reply.code(201).send(created);
      },
    );
    // A credential limited to domains sees and revokes only tokens limited to those domains.
    app.get('/tokens', { config: { scope: 'admin' }, schema: credentialSchemas.listTokens }, async (req) => ({
      items: (await listTokens(deps.store.db)).filter((t) => coversDomains(req.principal, t.domains)),
      next_cursor: null,
    }));
    app.delete(
      '/tokens/:token_id',
      { config: { scope: 'admin' }, schema: credentialSchemas.revokeToken },
      async (req) => {
        const id = req.params.token_id;
        const token = await revokeToken(deps.write, id, (t) => coversDomains(req.principal, t.domains));
        deps.auth.invalidate();
        return token;
      },
    );

    app.get(
      '/admin/signing-keys',
      { config: { scope: 'admin', towerWide: true }, schema: credentialSchemas.listSigningKeys },
      async () => ({
        items: await deps.keys.list(),
        next_cursor: null,
      }),
    );
    app.post(
      '/admin/signing-keys/rotate',
      { config: { scope: 'admin', towerWide: true }, schema: credentialSchemas.rotateSigningKey },
      async (_req, reply) => {
        const kid = await deps.keys.rotate();
        return reply.code(201).send({ kid });
      },
    );
    app.post(
      '/admin/signing-keys/:kid/retire',
      { config: { scope: 'admin', towerWide: true }, schema: credentialSchemas.retireSigningKey },
      async (req) => {
        await deps.keys.retire(req.params.kid);
        return { kid: req.params.kid, retired: true as const };
      },
    );

    app.post(
      '/nodes',
      { config: { scope: 'work:write' }, schema: credentialSchemas.registerNode },
      async (req, reply) => {
        const body = req.body;
        const p = req.principal;
        if (p.kind === 'node')
          throw new SvcError('forbidden', 'a node cannot register nodes: use an operator token');
        const jti = randomToken(16);
        const { row, created } = await deps.write(async (tx) => {
          const existing = await tx.db
            .selectFrom('nodes')
            .selectAll()
            .where('hostname', '=', body.hostname)
            .executeTakeFirst();
          if (existing) {
            const domains = existing.domains === null ? null : (JSON.parse(existing.domains) as string[]);
            if (!coversNode(p, domains)) throw new SvcError('conflict', `hostname ${body.hostname} is taken`);
            if (!body.force) {
              throw new SvcError(
                'conflict',
                `node ${body.hostname} is already registered (${existing.id}); re-register with force to rotate its token`,
              );
            }
            await tx.db
              .updateTable('nodes')
              .set({ jti, updated_at: tx.now })
              .where('id', '=', existing.id)
              .execute();
            tx.emit({
              type: 'matrix',
              payload: { entity: 'node', action: 'reregistered', id: existing.id, hostname: body.hostname },
            });
            return { row: { ...existing, jti, updated_at: tx.now }, created: false };
          }
          const row: NodeRow = {
            id: newId('node', tx.nowMs),
            hostname: body.hostname,
            jti,
            domains: p.domains === null ? null : JSON.stringify(p.domains),
            created_at: tx.now,
            updated_at: tx.now,
          };
          await tx.db.insertInto('nodes').values(row).execute();
          tx.emit({
            type: 'matrix',
            payload: { entity: 'node', action: 'registered', id: row.id, hostname: row.hostname },
          });
          return { row, created: true };
        });
        deps.auth.invalidate();
        const jwt = await deps.keys.signNode({ sub: row.id, hostname: row.hostname, jti });
        const online = (await presence([row.id])).has(row.id);
        return reply.code(created ? 201 : 200).send({ ...nodeFromRow(row, online), jwt });
      },
    );

    app.get(
      '/nodes',
      { config: { scope: 'feed:read' }, schema: credentialSchemas.listNodes },
      async (req) => {
        const rows = await deps.store.db.selectFrom('nodes').selectAll().orderBy('id').execute();
        const visible = rows.filter((r) => visibleNode(req.principal, r));
        const online = await presence(visible.map((r) => r.id));
        return { items: visible.map((r) => nodeFromRow(r, online.has(r.id))), next_cursor: null };
      },
    );
    app.get(
      '/nodes/:node_id',
      { config: { scope: 'feed:read' }, schema: credentialSchemas.getNode },
      async (req) => {
        const id = req.params.node_id;
        const row = await deps.store.db
          .selectFrom('nodes')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirst();
        if (!row || !visibleNode(req.principal, row)) throw new SvcError('not_found', `node ${id} not found`);
        return nodeFromRow(row, (await presence([row.id])).has(row.id));
      },
    );
  },
  { name: 'svc-credentials' },
);

/** A node is visible to principals that could see all of its domains, and to itself. */
export function visibleNode(p: Principal, row: NodeRow): boolean {
  if (p.nodeId === row.id) return true;
  const domains = row.domains === null ? null : (JSON.parse(row.domains) as string[]);
  return coversNode(p, domains);
}
