// Administration of credentials: service tokens, the tower's signing keys, and node
// registration (which mints node JWTs).
import { newId, randomToken } from '../../lib/ids.js';
import { SvcError } from '../../protocol/errors.js';
import type { Node } from '../../protocol/nodes.js';
import type { TowerContext } from '../context.js';
import type { TowerApp } from '../http/app.js';
import type { NodeRow } from '../store/types.js';
import { coversDomains, grantRefusal, type Principal } from './principal.js';
import { authSchemas } from './schemas.js';
import { insertToken, listTokens, revokeToken } from './tokens.js';

/** Whether a node is online is decided by the control channel (a later area); default: no. */
export type NodePresence = (nodeId: string) => boolean;

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

export function authRoutes(presence: NodePresence = () => false) {
  return (app: TowerApp, ctx: TowerContext): void => {
    app.post(
      '/tokens',
      { config: { scope: 'admin' }, schema: authSchemas.createToken },
      async (req, reply) => {
        const body = req.body;
        // Grants never widen: scopes and domains within the creator's own.
        const refusal = grantRefusal(req.principal, body.scopes, body.domains ?? null);
        if (refusal) throw new SvcError('forbidden', refusal);
        const created = await ctx.write((tx) => insertToken(tx, body));
        return reply.code(201).send(created);
      },
    );
    // A credential limited to domains sees and revokes only tokens limited to those domains.
    app.get('/tokens', { config: { scope: 'admin' }, schema: authSchemas.listTokens }, async (req) => ({
      items: (await listTokens(ctx.store.db)).filter((t) => coversDomains(req.principal, t.domains)),
      next_cursor: null,
    }));
    app.delete(
      '/tokens/:token_id',
      { config: { scope: 'admin' }, schema: authSchemas.revokeToken },
      async (req) => {
        const id = req.params.token_id;
        const token = await revokeToken(ctx.write, id, (t) => coversDomains(req.principal, t.domains));
        ctx.auth.invalidate();
        return token;
      },
    );

    app.get(
      '/admin/signing-keys',
      { config: { scope: 'admin', towerWide: true }, schema: authSchemas.listSigningKeys },
      async () => ({
        items: await ctx.keys.list(),
        next_cursor: null,
      }),
    );
    app.post(
      '/admin/signing-keys/rotate',
      { config: { scope: 'admin', towerWide: true }, schema: authSchemas.rotateSigningKey },
      async (_req, reply) => {
        const kid = await ctx.keys.rotate();
        return reply.code(201).send({ kid });
      },
    );
    app.post(
      '/admin/signing-keys/:kid/retire',
      { config: { scope: 'admin', towerWide: true }, schema: authSchemas.retireSigningKey },
      async (req) => {
        await ctx.keys.retire(req.params.kid);
        return { kid: req.params.kid, retired: true as const };
      },
    );

    app.post(
      '/nodes',
      { config: { scope: 'work:write' }, schema: authSchemas.registerNode },
      async (req, reply) => {
        const body = req.body;
        const p = req.principal;
        if (p.kind === 'node')
          throw new SvcError('forbidden', 'a node cannot register nodes: use an operator token');
        const jti = randomToken(16);
        const { row, created } = await ctx.write(async (tx) => {
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
        ctx.auth.invalidate();
        const jwt = await ctx.keys.signNode({ sub: row.id, hostname: row.hostname, jti });
        return reply.code(created ? 201 : 200).send({ ...nodeFromRow(row, presence(row.id)), jwt });
      },
    );

    app.get('/nodes', { config: { scope: 'feed:read' }, schema: authSchemas.listNodes }, async (req) => {
      const rows = await ctx.store.db.selectFrom('nodes').selectAll().orderBy('id').execute();
      return {
        items: rows.filter((r) => visibleNode(req.principal, r)).map((r) => nodeFromRow(r, presence(r.id))),
        next_cursor: null,
      };
    });
    app.get(
      '/nodes/:node_id',
      { config: { scope: 'feed:read' }, schema: authSchemas.getNode },
      async (req) => {
        const id = req.params.node_id;
        const row = await ctx.store.db
          .selectFrom('nodes')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirst();
        if (!row || !visibleNode(req.principal, row)) throw new SvcError('not_found', `node ${id} not found`);
        return nodeFromRow(row, presence(row.id));
      },
    );
  };
}

/** A node is visible to principals that could see all of its domains, and to itself. */
export function visibleNode(p: Principal, row: NodeRow): boolean {
  if (p.nodeId === row.id) return true;
  const domains = row.domains === null ? null : (JSON.parse(row.domains) as string[]);
  return coversNode(p, domains);
}
