// `svc domain …` and `svc mission …`: create, list, get, with tables or --json.
import type { Command } from 'commander';
import type { List } from '../../protocol/common.js';
import type { Domain, Mission } from '../../protocol/records.js';
import { seg } from '../client.js';
import { type CommandDeps, globals } from '../deps.js';
import { keyValues, print, table } from '../output.js';

export function registerRecords(program: Command, deps: CommandDeps): void {
  const domain = program.command('domain').description('domains: the unit of access control');
  domain
    .command('create <name>')
    .description('create a domain (admin)')
    .option('--description <text>', 'what the domain is for')
    .action(async (name: string, o: { description?: string }, cmd: Command) => {
      const d = await (await deps.client(cmd)).post<Domain>('/domains', {
        name,
        ...(o.description ? { description: o.description } : {}),
      });
      print(deps.io, Boolean(globals(cmd).json), d, () => keyValues(d));
    });
  domain
    .command('list')
    .description('list the domains you may see')
    .option('--limit <n>', 'page size', '100')
    .option('--cursor <cursor>', 'continue from a previous page')
    .action(async (o: { limit: string; cursor?: string }, cmd: Command) => {
      const q = new URLSearchParams({ limit: o.limit, ...(o.cursor ? { cursor: o.cursor } : {}) });
      const res = await (await deps.client(cmd)).get<List<Domain>>(`/domains?${q}`);
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        withCursor(
          table(res.items, [
            { header: 'id', get: (d) => d.id },
            { header: 'name', get: (d) => d.name },
            { header: 'created', get: (d) => d.created_at },
          ]),
          res.next_cursor,
        ),
      );
    });
  domain
    .command('get <domain_id>')
    .description('show one domain')
    .action(async (id: string, _o, cmd: Command) => {
      const d = await (await deps.client(cmd)).get<Domain>(`/domains/${seg(id)}`);
      print(deps.io, Boolean(globals(cmd).json), d, () => keyValues(d));
    });

  const mission = program.command('mission').description('missions within a domain');
  mission
    .command('create <name>')
    .description('create a mission')
    .requiredOption('--domain <domain_id>', 'domain of the mission')
    .option('--description <text>', 'what the mission is for')
    .option('--repository <path>', 'git repository the mission works in (tasks get worktrees)')
    .action(
      async (
        name: string,
        o: { domain: string; description?: string; repository?: string },
        cmd: Command,
      ) => {
        const m = await (await deps.client(cmd)).post<Mission>(`/domains/${seg(o.domain)}/m`, {
          name,
          ...(o.description ? { description: o.description } : {}),
          ...(o.repository ? { repository: o.repository } : {}),
        });
        print(deps.io, Boolean(globals(cmd).json), m, () => keyValues(m));
      },
    );
  mission
    .command('list')
    .description('list missions of a domain')
    .requiredOption('--domain <domain_id>', 'domain to list')
    .option('--limit <n>', 'page size', '100')
    .option('--cursor <cursor>', 'continue from a previous page')
    .action(async (o: { domain: string; limit: string; cursor?: string }, cmd: Command) => {
      const q = new URLSearchParams({ limit: o.limit, ...(o.cursor ? { cursor: o.cursor } : {}) });
      const res = await (await deps.client(cmd)).get<List<Mission>>(`/domains/${seg(o.domain)}/m?${q}`);
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        withCursor(
          table(res.items, [
            { header: 'id', get: (m) => m.id },
            { header: 'name', get: (m) => m.name },
            { header: 'repository', get: (m) => m.repository },
            { header: 'created', get: (m) => m.created_at },
          ]),
          res.next_cursor,
        ),
      );
    });
  mission
    .command('get <mission_id>')
    .description('show one mission')
    .requiredOption('--domain <domain_id>', 'domain of the mission')
    .action(async (id: string, o: { domain: string }, cmd: Command) => {
      const m = await (await deps.client(cmd)).get<Mission>(`/domains/${seg(o.domain)}/m/${seg(id)}`);
      print(deps.io, Boolean(globals(cmd).json), m, () => keyValues(m));
    });
}

function withCursor(text: string, cursor: string | null): string {
  return cursor ? `${text}\n\nmore: --cursor ${cursor}` : text;
}
