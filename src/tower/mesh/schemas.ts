// The mesh area's route schemas (http/route-schema.ts): agent enrolment and listing, mesh
// tasks (the MCP tool call's is in mcp/schemas.ts). Shapes come from src/protocol.
import { IdParam, ListOf } from '../../protocol/common.js';
import {
  Agent,
  AgentEnroll,
  AgentListQuery,
  MeshTask,
  MeshTaskCreate,
  MeshTaskListQuery,
} from '../../protocol/mesh.js';
import { described, noContent, route } from '../http/route-schema.js';

const AgentParam = IdParam('agent_id');
const MissionParam = IdParam('mission_id');
const TaskParam = IdParam('task_id');

export const meshSchemas = {
  enrollAgent: route({
    summary: 'Enrol an agent (node JWT)',
    tags: ['agents'],
    body: AgentEnroll,
    response: { 201: described(Agent, 'the enrolled agent') },
    errors: ['not_found'],
    writes: true,
  }),
  listAgents: route({
    summary: 'List agents',
    tags: ['agents'],
    querystring: AgentListQuery,
    response: { 200: ListOf(Agent) },
    errors: ['not_found'],
  }),
  getAgent: route({
    summary: 'Read an agent',
    tags: ['agents'],
    params: AgentParam,
    response: { 200: Agent },
    errors: ['agent_not_found'],
  }),
  deleteAgent: route({
    summary: 'Remove an agent (its node)',
    tags: ['agents'],
    params: AgentParam,
    response: { 204: noContent('removed') },
    errors: ['agent_not_found'],
    writes: true,
  }),
  createTask: route({
    summary: 'Submit a mesh task',
    tags: ['mesh'],
    params: MissionParam,
    body: MeshTaskCreate,
    response: { 201: described(MeshTask, 'the pending task') },
    errors: ['not_found', 'agent_not_found', 'conflict'],
    writes: true,
  }),
  listTasks: route({
    summary: "List a mission's mesh tasks",
    tags: ['mesh'],
    params: MissionParam,
    querystring: MeshTaskListQuery,
    response: { 200: ListOf(MeshTask) },
    errors: ['not_found'],
  }),
  getTask: route({
    summary: 'Read a mesh task',
    tags: ['mesh'],
    params: TaskParam,
    response: { 200: MeshTask },
    errors: ['not_found'],
  }),
  retryTask: route({
    summary: 'Retry a failed mesh task',
    tags: ['mesh'],
    params: TaskParam,
    response: { 200: described(MeshTask, 'the task, pending again') },
    errors: ['not_found', 'illegal_transition'],
    writes: true,
  }),
  cancelTask: route({
    summary: 'Cancel a mesh task',
    tags: ['mesh'],
    params: TaskParam,
    response: { 200: described(MeshTask, 'the cancelled task') },
    errors: ['not_found', 'illegal_transition'],
    writes: true,
  }),
};
