// The feed area's route schemas (http/route-schema.ts): the event streams, node-published
// events, approvals and the inbox. Shapes come from src/protocol.
import {
  Approval,
  ApprovalCreate,
  ApprovalDecide,
  ApprovalListQuery,
  InboxListQuery,
  InboxMessage,
  InboxSend,
} from '../../protocol/approvals.js';
import { IdParam, ListOf } from '../../protocol/common.js';
import { NodeEventsAccepted, NodeEventsBody, StreamQuery } from '../../protocol/events.js';
import { described, media, noContent, route } from '../http/route-schema.js';

const ApprovalParam = IdParam('approval_id');

export const feedSchemas = {
  stream: route({
    summary: 'Follow the feed (Server-Sent Events)',
    description:
      'Each event is `id: <id>` + `data: <event JSON>` (FeedEvent, docs/events.md); `event: reset` ' +
      'when a resume crosses a gap. Resume with `Last-Event-ID` or `?last_event_id=`.',
    tags: ['feed'],
    querystring: StreamQuery,
    response: { 200: media('text/event-stream', 'the event stream, until the client leaves') },
    errors: ['not_found'],
  }),
  ws: route({
    summary: 'Follow the feed (WebSocket)',
    description:
      'One event JSON per text frame; a reset is `{"type":"reset",…}`. Same query as /events/stream.',
    tags: ['feed'],
    querystring: StreamQuery,
    response: { 101: noContent('Switching Protocols: the WebSocket of events') },
  }),
  nodeEvents: route({
    summary: 'Publish events of a node (node JWT)',
    tags: ['feed'],
    body: NodeEventsBody,
    response: { 202: described(NodeEventsAccepted, 'accepted, and skipped as already published') },
    writes: true,
  }),
  createApproval: route({
    summary: 'Ask for an approval',
    tags: ['approvals'],
    body: ApprovalCreate,
    response: { 201: described(Approval, 'the pending approval') },
    errors: ['not_found'],
    writes: true,
  }),
  listApprovals: route({
    summary: 'List approvals',
    tags: ['approvals'],
    querystring: ApprovalListQuery,
    response: { 200: ListOf(Approval) },
    errors: ['not_found'],
  }),
  getApproval: route({
    summary: 'Read an approval',
    tags: ['approvals'],
    params: ApprovalParam,
    response: { 200: Approval },
    errors: ['not_found'],
  }),
  decideApproval: (decision: 'approve' | 'reject') =>
    route({
      summary: decision === 'approve' ? 'Approve' : 'Reject',
      tags: ['approvals'],
      params: ApprovalParam,
      body: ApprovalDecide,
      response: { 200: described(Approval, 'the decided approval') },
      errors: ['not_found', 'already_decided'],
      writes: true,
    }),
  sendInbox: route({
    summary: "Send a message to an agent's inbox",
    tags: ['inbox'],
    body: InboxSend,
    response: { 201: InboxMessage },
    errors: ['not_found', 'agent_not_found'],
    writes: true,
  }),
  listInbox: route({
    summary: 'List inbox messages',
    tags: ['inbox'],
    querystring: InboxListQuery,
    response: { 200: ListOf(InboxMessage) },
    errors: ['not_found'],
  }),
};
