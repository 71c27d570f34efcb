// Serves the built web console (dist/console, made by `npm run build`) at /. index.html is
// never cached (it names the current hashed assets); files under /assets/ have content
// hashes in their names and are cached for a year. Every response carries a strict CSP: the
// console loads nothing from other origins and talks only to this tower.
// API routes are registered as static paths, so they always win over /assets/* and /.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { SvcError } from '../../protocol/errors.js';
import type { TowerApp } from '../http/app.js';
import { consoleSchemas } from './schemas.js';

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  // xterm.js positions its rows with inline styles.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.map': 'application/json',
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/** dist/console beside the running code: dist/tower/console → dist/console; src → dist too. */
export function defaultConsoleDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const root = join(here, '..', '..', '..');
  return join(root, 'dist', 'console');
}

function loadAssets(dir: string): Map<string, Asset> {
  const out = new Map<string, Asset>();
  if (!existsSync(join(dir, 'index.html'))) return out;
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) {
        walk(p);
        continue;
      }
      const body = readFileSync(p);
      const url = `/${relative(dir, p).split(sep).join('/')}`;
      out.set(url, {
        body,
        type: TYPES[extname(p)] ?? 'application/octet-stream',
        etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
      });
    }
  };
  walk(dir);
  return out;
}

function securityHeaders(reply: FastifyReply): void {
  reply.header('content-security-policy', CONSOLE_CSP);
  reply.header('x-content-type-options', 'nosniff');
  reply.header('referrer-policy', 'no-referrer');
  reply.header('x-frame-options', 'DENY');
  reply.header('cross-origin-opener-policy', 'same-origin');
  reply.header('cross-origin-resource-policy', 'same-origin');
}

export interface ConsoleDeps {
  /** The built web console (default: dist/console of this package). */
  dir?: string;
}

export const consoleRoutes = fp(
  async (app: TowerApp, deps: ConsoleDeps) => {
    const dir = deps.dir ?? defaultConsoleDir();
    // Read once at start: the bundle is small and immutable for the life of the process.
    const assets = loadAssets(dir);
    const send = (req: FastifyRequest, reply: FastifyReply, asset: Asset, immutable: boolean) => {
      securityHeaders(reply);
      reply.header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
      reply.header('etag', asset.etag);
      reply.type(asset.type);
      if (req.headers['if-none-match'] === asset.etag) return reply.code(304).send();
      return reply.send(asset.body);
    };
    const index = (req: FastifyRequest, reply: FastifyReply) => {
      const asset = assets.get('/index.html');
      if (!asset) {
        throw new SvcError(
          'unavailable',
          `the web console is not built (no ${dir}/index.html); run npm run build`,
        );
      }
      return send(req, reply, asset, false);
    };
    const config = { scope: 'public', rateLimitExempt: true } as const;
    app.get('/', { config, schema: consoleSchemas.index }, index);
    app.get('/index.html', { config, schema: consoleSchemas.index }, index);
    app.get('/assets/*', { config, schema: consoleSchemas.asset }, (req, reply) => {
      const path = req.url.split('?')[0] ?? '';
      const asset = assets.get(decodeURIComponent(path));
      if (!asset) throw new SvcError('not_found', `no console asset ${path}`);
      return send(req, reply, asset, true);
    });
  },
  { name: 'svc-console' },
);
