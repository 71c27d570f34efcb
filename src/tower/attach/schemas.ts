// The attach area's route schemas (http/route-schema.ts): tickets, the viewer's WebSocket and
// the node's dial-back. Frames: src/protocol/attach.ts and docs/attach.md.
import { Type } from '@sinclair/typebox';
import { AttachTicket, AttachTicketRequest } from '../../protocol/attach.js';
import { described, noContent, route } from '../http/route-schema.js';

const ATTACH_ERRORS = ['not_found', 'agent_not_found', 'not_authorized', 'node_offline'] as const;

export const attachSchemas = {
  ticket: route({
    summary: 'A one-use ticket to attach to an agent',
    tags: ['attach'],
    body: AttachTicketRequest,
    response: { 201: described(AttachTicket, 'the ticket, good for one minute') },
    errors: [...ATTACH_ERRORS],
  }),
  viewer: route({
    summary: "Attach to an agent's terminal (WebSocket, with a ticket)",
    description:
      'Authenticated by `?ticket=` (POST /api/attach-tickets); `cols`, `rows`, `read_only` size ' +
      'the view. Binary frames are terminal bytes; text frames are control frames.',
    tags: ['attach'],
    public: true,
    response: { 101: noContent('Switching Protocols: the terminal stream') },
  }),
  nodeDialBack: route({
    summary: 'The node side of an attach stream (WebSocket, node JWT)',
    tags: ['attach'],
    params: Type.Object({ stream_id: Type.String() }, { additionalProperties: false }),
    response: { 101: noContent('Switching Protocols: joined to the viewer') },
  }),
};
