// `svc secret set|list|describe|grant|revoke|rollback|rm` and `svc tower master-key|
// rotate-master-key`. Values are read from stdin only (never argv, which other users can
// see in ps) and are never printed.
import type { Command } from 'commander';
import type { List } from '../../protocol/common.js';
import {
  isSecretName,
  type MasterKeyRotated,
  type MasterKeyStatus,
  type SecretGrant,
  type SecretInfo,
} from '../../protocol/secrets.js';
import { seg } from '../client.js';
import { type CommandDeps, collect, globals } from '../deps.js';
import { keyValues, print, table } from '../output.js';
import { UsageError } from '../run.js';

interface DomainOpt {
  domain: string;
}

function checkName(name: string): string {
  if (!isSecretName(name)) {
    throw new UsageError(
      `invalid secret name "${name}": use letters, digits, _ . -, starting with a letter or _ (at most 128)`,
    );
  }
  return name;
}

const path = (name: string, domain: string, rest = '') =>
  `/secrets/${seg(checkName(name))}${rest}?domain_id=${encodeURIComponent(domain)}`;

/** The value as piped: one trailing newline (from echo or a file) is not part of it. */
export function valueFromStdin(text: string, keepNewline: boolean): string {
  if (keepNewline) return text;
  if (text.endsWith('\r\n')) return text.slice(0, -2);
  if (text.endsWith('\n')) return text.slice(0, -1);
  return text;
}

function describeLines(s: SecretInfo): string {
  return [
    keyValues({
      name: s.name,
      domain: s.domain_id,
      description: s.description || '-',
      version: s.version,
      updated: s.updated_at,
    }),
    '',
    'versions:',
    table(s.versions, [
      { header: 'version', get: (v) => v.version },
      { header: 'created', get: (v) => v.created_at },
      { header: 'by', get: (v) => v.created_by },
    ]),
    '',
    'grants:',
    s.grants.length === 0
      ? '(none)'
      : table(s.grants, [
          { header: 'agent', get: (g) => g.agent_id },
          { header: 'granted', get: (g) => g.granted_at },
          { header: 'by', get: (g) => g.granted_by },
        ]),
  ].join('\n');
}

export function registerSecret(program: Command, deps: CommandDeps): void {
  const secret = program
    .command('secret')
    .description('secrets per domain: values are write-only; agents read them through svcd');

  secret
    .command('set <name>')
    .description('create or update a secret (new version); the value is read from stdin')
    .requiredOption('--domain <domain_id>', 'domain of the secret')
    .option('--description <text>', 'what the secret is for')
    .option('--keep-newline', 'keep a trailing newline of the input as part of the value')
    .addHelpText(
      'after',
      '\nExamples:\n  svc secret set GITHUB_TOKEN --domain dom_… < token.txt\n  printf %s "$TOKEN" | svc secret set GITHUB_TOKEN --domain dom_…',
    )
    .action(
      async (name: string, o: DomainOpt & { description?: string; keepNewline?: boolean }, cmd: Command) => {
        checkName(name);
        if (deps.io.stdinIsTTY?.()) {
          throw new UsageError(
            'the value is read from stdin, which is a terminal: pipe it in, e.g. "svc secret set NAME --domain D < file"',
          );
        }
        const value = valueFromStdin(await deps.io.readStdin(), Boolean(o.keepNewline));
        if (value.length === 0) throw new UsageError('stdin was empty: pipe the secret value in');
        const res = await (await deps.client(cmd)).request<SecretInfo>('PUT', path(name, o.domain), {
          value,
          ...(o.description !== undefined ? { description: o.description } : {}),
        });
        print(
          deps.io,
          Boolean(globals(cmd).json),
          res,
          () => `${res.name} set in ${res.domain_id}: version ${res.version}`,
        );
      },
    );

  secret
    .command('list')
    .description('list secrets: names, versions and grants (never values)')
    .option('--domain <domain_id>', 'only this domain')
    .option('--limit <n>', 'page size', '100')
    .option('--cursor <cursor>', 'continue from a previous page')
    .action(async (o: { domain?: string; limit: string; cursor?: string }, cmd: Command) => {
      const q = new URLSearchParams({
        limit: o.limit,
        ...(o.domain ? { domain_id: o.domain } : {}),
        ...(o.cursor ? { cursor: o.cursor } : {}),
      });
      const res = await (await deps.client(cmd)).get<List<SecretInfo>>(`/secrets?${q}`);
      print(deps.io, Boolean(globals(cmd).json), res, () => {
        const t = table(res.items, [
          { header: 'name', get: (s) => s.name },
          { header: 'domain', get: (s) => s.domain_id },
          { header: 'version', get: (s) => s.version },
          { header: 'updated', get: (s) => s.updated_at },
          { header: 'grants', get: (s) => s.grants.map((g) => g.agent_id).join(' ') },
        ]);
        return res.next_cursor ? `${t}\n(more: --cursor ${res.next_cursor})` : t;
      });
    });

  secret
    .command('describe <name>')
    .description('show one secret: kept versions and grants (never the value)')
    .requiredOption('--domain <domain_id>', 'domain of the secret')
    .action(async (name: string, o: DomainOpt, cmd: Command) => {
      const res = await (await deps.client(cmd)).get<SecretInfo>(path(name, o.domain));
      print(deps.io, Boolean(globals(cmd).json), res, () => describeLines(res));
    });

  secret
    .command('grant <name>')
    .description('let agents read a secret through their node daemon')
    .requiredOption('--domain <domain_id>', 'domain of the secret')
    .requiredOption('--agent <agent_id>', 'agent to grant (repeatable)', collect, [])
    .action(async (name: string, o: DomainOpt & { agent: string[] }, cmd: Command) => {
      const client = await deps.client(cmd);
      const grants: SecretGrant[] = [];
      for (const agent of o.agent) {
        grants.push(await client.post<SecretGrant>(path(name, o.domain, '/grants'), { agent_id: agent }));
      }
      print(deps.io, Boolean(globals(cmd).json), { items: grants }, () =>
        grants.map((g) => `granted ${name} to ${g.agent_id}`).join('\n'),
      );
    });

  secret
    .command('revoke <name>')
    .description('take a grant away; the next read by that agent is refused')
    .requiredOption('--domain <domain_id>', 'domain of the secret')
    .requiredOption('--agent <agent_id>', 'agent to revoke (repeatable)', collect, [])
    .action(async (name: string, o: DomainOpt & { agent: string[] }, cmd: Command) => {
      const client = await deps.client(cmd);
      for (const agent of o.agent) {
        await client.request('DELETE', path(name, o.domain, `/grants/${seg(agent)}`));
      }
      print(deps.io, Boolean(globals(cmd).json), { revoked: o.agent }, () =>
        o.agent.map((a) => `revoked ${name} from ${a}`).join('\n'),
      );
    });

  secret
    .command('rollback <name>')
    .description('make the value of a kept older version current again (as a new version)')
    .requiredOption('--domain <domain_id>', 'domain of the secret')
    .requiredOption('--to <version>', 'version to restore')
    .action(async (name: string, o: DomainOpt & { to: string }, cmd: Command) => {
      const version = Number(o.to);
      if (!Number.isInteger(version) || version < 1)
        throw new UsageError(`--to must be a version number, got "${o.to}"`);
      const res = await (await deps.client(cmd)).post<SecretInfo>(path(name, o.domain, '/rollback'), {
        version,
      });
      print(
        deps.io,
        Boolean(globals(cmd).json),
        res,
        () => `${res.name}: version ${res.version} now holds the value of version ${version}`,
      );
    });

  secret
    .command('rm <name>')
    .description('delete a secret with all its versions and grants')
    .requiredOption('--domain <domain_id>', 'domain of the secret')
    .action(async (name: string, o: DomainOpt, cmd: Command) => {
      await (await deps.client(cmd)).request('DELETE', path(name, o.domain));
      print(
        deps.io,
        Boolean(globals(cmd).json),
        { deleted: name, domain_id: o.domain },
        () => `deleted ${name}`,
      );
    });

  const tower = program.commands.find((c) => c.name() === 'tower') ?? program.command('tower');
  tower
    .command('master-key')
    .description('show the master key in use (its fingerprint, never the key) and what it seals')
    .action(async (_o, cmd: Command) => {
      const res = await (await deps.client(cmd)).get<MasterKeyStatus>('/admin/master-key');
      print(deps.io, Boolean(globals(cmd).json), res, () =>
        keyValues({
          key_id: res.key_id,
          source: res.source === 'env' ? 'SVC_MASTER_KEY' : 'master.key',
          previous: res.previous_key_ids.join(' ') || '-',
          versions: Object.entries(res.versions_by_key)
            .map(([k, n]) => `${k}=${n}`)
            .join(' '),
          ...(res.problem ? { problem: res.problem } : {}),
        }),
      );
    });
  tower
    .command('rotate-master-key')
    .description('generate a new master key in master.key and re-encrypt every secret version under it')
    .action(async (_o, cmd: Command) => {
      const res = await (await deps.client(cmd)).post<MasterKeyRotated>('/admin/master-key/rotate');
      print(
        deps.io,
        Boolean(globals(cmd).json),
        res,
        () =>
          `master key rotated: ${res.previous_key_id} → ${res.key_id}; ${res.reencrypted} versions re-encrypted`,
      );
    });
}
