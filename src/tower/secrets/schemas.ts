// The secrets area's route schemas (http/route-schema.ts): the operator routes (values are
// write-only), the node fetch and the master key. Shapes come from src/protocol.
import { Type } from '@sinclair/typebox';
import { ListOf } from '../../protocol/common.js';
import {
  MasterKeyRotated,
  MasterKeyStatus,
  SecretDomainQuery,
  SecretFetch,
  SecretFetched,
  SecretGrant,
  SecretGrantCreate,
  SecretInfo,
  SecretListQuery,
  SecretName,
  SecretPut,
  SecretRollback,
} from '../../protocol/secrets.js';
import { described, noContent, route } from '../http/route-schema.js';

const closed = { additionalProperties: false } as const;
const NameParam = Type.Object({ name: SecretName }, closed);
const GrantParams = Type.Object(
  { name: SecretName, agent_id: Type.String({ minLength: 1, maxLength: 100 }) },
  closed,
);
const tags = ['secrets'];
const ERRORS = ['not_found', 'secret_not_found', 'master_key_mismatch'] as const;

export const secretSchemas = {
  list: route({
    summary: 'List secrets (never their values)',
    tags,
    querystring: SecretListQuery,
    response: { 200: ListOf(SecretInfo) },
    errors: ['not_found'],
  }),
  get: route({
    summary: 'Read a secret (never its value)',
    tags,
    params: NameParam,
    querystring: SecretDomainQuery,
    response: { 200: SecretInfo },
    errors: [...ERRORS],
  }),
  put: route({
    summary: 'Set a secret (a new version)',
    tags,
    params: NameParam,
    querystring: SecretDomainQuery,
    body: SecretPut,
    response: {
      200: described(SecretInfo, 'the secret, with its new version'),
      201: described(SecretInfo, 'the new secret'),
    },
    errors: [...ERRORS],
    writes: true,
  }),
  delete: route({
    summary: 'Delete a secret and its versions',
    tags,
    params: NameParam,
    querystring: SecretDomainQuery,
    response: { 204: noContent('deleted') },
    errors: [...ERRORS],
    writes: true,
  }),
  rollback: route({
    summary: 'Make a kept version current again',
    tags,
    params: NameParam,
    querystring: SecretDomainQuery,
    body: SecretRollback,
    response: { 200: SecretInfo },
    errors: [...ERRORS],
    writes: true,
  }),
  grant: route({
    summary: 'Grant a secret to an agent',
    tags,
    params: NameParam,
    querystring: SecretDomainQuery,
    body: SecretGrantCreate,
    response: { 200: described(SecretGrant, 'already granted'), 201: described(SecretGrant, 'granted') },
    errors: [...ERRORS, 'conflict'],
    writes: true,
  }),
  revoke: route({
    summary: 'Revoke a grant',
    tags,
    params: GrantParams,
    querystring: SecretDomainQuery,
    response: { 204: noContent('revoked') },
    errors: [...ERRORS],
    writes: true,
  }),
  fetch: route({
    summary: 'Fetch a value for an agent (node JWT)',
    description: 'Only for an agent enrolled on the calling node and granted the secret.',
    tags,
    params: NameParam,
    body: SecretFetch,
    response: { 200: described(SecretFetched, 'the current value (Cache-Control: no-store)') },
    errors: [...ERRORS, 'agent_not_found', 'not_granted'],
    writes: true,
  }),
  masterKey: route({
    summary: "The master key's status",
    tags,
    response: { 200: MasterKeyStatus },
  }),
  rotateMasterKey: route({
    summary: 'Re-encrypt every stored version under a new master key',
    tags,
    response: { 200: MasterKeyRotated },
    errors: ['conflict', 'master_key_mismatch'],
    writes: true,
  }),
};
