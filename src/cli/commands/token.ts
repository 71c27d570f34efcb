// `svc token create|list|revoke` (admin) and `svc login`.
import type { Command } from 'commander';
import { parseDuration } from '../../lib/duration.js';
import type { Token, TokenCreated } from '../../protocol/auth.js';
import { isScope } from '../../protocol/scopes.js';
import { TowerClient } from '../client.js';
import { type CommandDeps, collect, globals } from '../deps.js';
import { resolveCredentials, saveCredentials } from '../login-store.js';
import { keyValues, print, table } from '../output.js';
import { UsageError } from '../run.js';

export function registerToken(program: Command, deps: CommandDeps): void {
  const token = program.command('token').description('service tokens (admin)');

  token
    .command('create')
    .description('create a service token; it is printed once')
    .requiredOption('--name <name>', 'what the token is for')
    .option('--scope <scope>', 'feed:read | work:write | admin (repeatable)', collect, [])
    .option('--domain <domain_id>', 'restrict to this domain (repeatable; default: all)', collect, [])
    .option('--ttl <duration>', 'expire after e.g. 30d, 12h')
    .action(async (o: { name: string; scope: string[]; domain: string[]; ttl?: string }, cmd: Command) => {
      if (o.scope.length === 0)
        throw new UsageError('give at least one --scope (feed:read, work:write or admin)');
      const bad = o.scope.find((s) => !isScope(s));
      if (bad) throw new UsageError(`unknown scope "${bad}": use feed:read, work:write or admin`);
      let ttlSeconds: number | undefined;
      if (o.ttl) {
        try {
          ttlSeconds = Math.ceil(parseDuration(o.ttl) / 1000);
        } catch (e) {
          throw new UsageError(`--ttl: ${(e as Error).message}`);
        }
      }
      const body = {
        name: o.name,
        scopes: [...new Set(o.scope)],
        ...(o.domain.length ? { domains: [...new Set(o.domain)] } : {}),
        ...(ttlSeconds ? { ttl_seconds: ttlSeconds } : {}),
      };
      const created = await (await deps.client(cmd)).post<TokenCreated>('/tokens', body);
      print(deps.io, Boolean(globals(cmd).json), created, () =>
        [
          keyValues({
            id: created.id,
            name: created.name,
            scopes: created.scopes.join(' '),
            domains: created.domains?.join(' ') ?? 'all',
            expires: created.expires_at ?? 'never',
          }),
          '',
          'token (shown once, store it now):',
          created.token,
        ].join('\n'),
      );
    });

  token
    .command('list')
    .description('list service tokens (never their values)')
    .action(async (_o, cmd: Command) => {
      const res = await (await deps.client(cmd)).get<{ items: Token[] }>('/tokens');
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        table(res.items, [
          { header: 'id', get: (t) => t.id },
          { header: 'name', get: (t) => t.name },
          { header: 'scopes', get: (t) => t.scopes.join(' ') },
          { header: 'domains', get: (t) => t.domains?.join(' ') ?? 'all' },
          { header: 'expires', get: (t) => t.expires_at ?? 'never' },
          { header: 'revoked', get: (t) => t.revoked_at ?? '' },
        ]),
      );
    });

  token
    .command('revoke <token_id>')
    .description('revoke a token; open streams using it close within a second')
    .action(async (id: string, _o, cmd: Command) => {
      const res = await (await deps.client(cmd)).request<Token>(
        'DELETE',
        `/tokens/${encodeURIComponent(id)}`,
      );
      print(deps.io, Boolean(globals(cmd).json), res, () => `revoked ${res.id} (${res.name})`);
    });

  program
    .command('login')
    .description(
      'check --url and --token against the tower, then store them in $SVC_HOME/credentials.json (0600)',
    )
    .addHelpText('after', '\nExample:\n  svc login --url https://tower.example.com --token svc_…')
    .action(async (_o, cmd: Command) => {
      // --url and --token are the global flags.
      const o = globals(cmd);
      if (!o.url || !o.token) throw new UsageError('svc login needs --url URL and --token TOKEN');
      const creds = await resolveCredentials(deps.io, { url: o.url, token: o.token });
      const client = new TowerClient(creds);
      // Prove the credential works before saving it.
      await client.get('/domains?limit=1');
      await saveCredentials(deps.io, { url: creds.url, token: o.token });
      print(
        deps.io,
        Boolean(globals(cmd).json),
        { url: creds.url, saved: deps.io.paths.credentialsFile },
        () => `logged in to ${creds.url}; credentials saved to ${deps.io.paths.credentialsFile}`,
      );
    });
}
