// The credentials area's route schemas (http/route-schema.ts): service tokens, the node-JWT
// signing keys, and node registration and listing. Shapes come from src/protocol.
import { type TString, Type } from '@sinclair/typebox';
import { SigningKey, Token, TokenCreate, TokenCreated } from '../../protocol/auth.js';
import { ListOf } from '../../protocol/common.js';
import { Node, NodeRegister, NodeRegistered } from '../../protocol/nodes.js';
import { described, route } from '../http/route-schema.js';

/** Path parameters here are any short text: an unknown one is a 404. */
const param = <N extends string>(name: N) =>
  Type.Object({ [name]: Type.String({ minLength: 1, maxLength: 100 }) } as Record<N, TString>, {
    additionalProperties: false,
  });

const Kid = Type.Object({ kid: Type.String() });

export const credentialSchemas = {
  createToken: route({
    summary: 'Create a service token',
    description: 'The token value is in this answer only. Grants never widen (docs/api.md).',
    tags: ['credentials'],
    body: TokenCreate,
    response: { 201: described(TokenCreated, 'the token, with its value') },
    writes: true,
  }),
  listTokens: route({
    summary: 'List service tokens (never their values)',
    tags: ['credentials'],
    response: { 200: ListOf(Token) },
  }),
  revokeToken: route({
    summary: 'Revoke a service token',
    tags: ['credentials'],
    params: param('token_id'),
    response: { 200: described(Token, 'the token, revoked') },
    errors: ['not_found'],
    writes: true,
  }),
  listSigningKeys: route({
    summary: "List the tower's node-JWT signing keys",
    tags: ['credentials'],
    response: { 200: ListOf(SigningKey) },
  }),
  rotateSigningKey: route({
    summary: 'Sign node JWTs with a new key',
    tags: ['credentials'],
    response: { 201: described(Kid, 'the new key') },
    writes: true,
  }),
  retireSigningKey: route({
    summary: 'Retire a signing key',
    description: 'Node JWTs signed with it stop working; their channels and streams close.',
    tags: ['credentials'],
    params: param('kid'),
    response: { 200: Type.Object({ kid: Type.String(), retired: Type.Literal(true) }) },
    errors: ['not_found', 'conflict'],
    writes: true,
  }),
  registerNode: route({
    summary: 'Register a node (mints its JWT)',
    description: 'An existing hostname is 409 unless `force`, which rotates the JWT (200).',
    tags: ['nodes'],
    body: NodeRegister,
    response: {
      200: described(NodeRegistered, 'the node re-registered, with its new JWT'),
      201: described(NodeRegistered, 'the new node, with its JWT'),
    },
    errors: ['conflict'],
    writes: true,
  }),
  listNodes: route({
    summary: 'List the nodes the credential covers',
    tags: ['nodes'],
    response: { 200: ListOf(Node) },
  }),
  getNode: route({
    summary: 'Read a node',
    tags: ['nodes'],
    params: param('node_id'),
    response: { 200: Node },
    errors: ['not_found'],
  }),
};
