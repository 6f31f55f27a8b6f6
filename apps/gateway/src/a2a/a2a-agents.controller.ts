import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { A2ABroker, AgentView } from '@libs/a2a';
import type { Caller } from '@libs/security';
import { a2aUrlsOf } from './a2a-paths';
import { CallerParam, GateRoute, Gates } from '../http/gate-route';
import { z } from 'zod';
import { agentCardSchema } from '@libs/a2a';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { agentViewSchema } from '../http/api-schemas';
import { parseBody } from '../http/parse-body';

const NAME = { name: "the agent's name" };
/** The body parseAgentUpdate (libs/a2a/tasks/agent-updates.ts) accepts. */
const AGENT_UPDATE = z.object({
  state: z
    .string()
    .describe('working, input-required, auth-required, completed, failed, canceled, rejected (or TASK_STATE_*)'),
  message: z.looseObject({}).optional().describe('an A2A v1.0 status message'),
  artifacts: z
    .array(z.looseObject({}))
    .optional()
    .describe('A2A v1.0 artifacts; one with the id of an earlier one replaces it'),
});
const AGENT = { description: 'the agent', schema: agentViewSchema };
/** A heartbeat's body: the registration the replica was started under (its PUT's `registration`), if it names one. */
const HEARTBEAT = z
  .object({
    registration: z
      .number()
      .int()
      .min(1)
      .max(2_147_483_647)
      .optional()
      .describe("the agent's registration this replica runs under; refused 409 once the agent is registered again"),
  })
  .strict();

/**
 * The A2A agents registry (docs/a2a.md), scoped to the caller's tenant (another tenant's agent is a 404). Gate
 * actions: registering and removing an agent is `subscribe` (the agent takes work from the mesh, as a subscriber
 * does); reading the registry and the cards is `publish` (what a client needs to send tasks, see
 * a2a-rpc.controller.ts).
 */
@Controller('a2a/agents')
export class A2AAgentsController {
  constructor(
    private readonly broker: A2ABroker,
    private readonly gates: Gates,
  ) {}

  @Put(':name')
  @ApiRoute({
    summary: 'Register (or replace) an A2A agent by its card',
    params: NAME,
    body: { schema: agentCardSchema },
    responses: {
      200: { ...AGENT, description: 'replaced' },
      201: { ...AGENT, description: 'registered' },
      ...errors(400, 409, 413),
      ...GATED,
    },
  })
  // A registration is charged as a publish (one event, the card's bytes) and signed like one.
  @GateRoute({ action: 'subscribe', publishes: true })
  async put(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Body() body: unknown,
    @Res({ passthrough: true }) reply: FastifyReply,
    @Query('style') style?: string,
  ): Promise<AgentView> {
    const { agent, created } = await this.broker.register(caller.tenant, name, body, style || undefined);
    void reply.status(created ? 201 : 200);
    return agent;
  }

  @Get()
  @ApiRoute({
    summary: "The tenant's agents",
    query: z.object({
      skill: z.string().optional().describe('agents with this skill id'),
      tag: z.string().optional().describe('agents with a skill of this tag'),
    }),
    responses: { 200: { description: 'the agents', schema: z.object({ agents: z.array(agentViewSchema) }) }, ...GATED },
  })
  @GateRoute({ action: 'publish' })
  async list(
    @CallerParam() caller: Caller,
    @Query('skill') skill?: string,
    @Query('tag') tag?: string,
  ): Promise<{ agents: AgentView[] }> {
    return { agents: await this.broker.list(caller.tenant, { skill: skill || undefined, tag: tag || undefined }) };
  }

  @Get(':name')
  @ApiRoute({ summary: 'One agent', params: NAME, responses: { 200: AGENT, ...errors(404), ...GATED } })
  @GateRoute({ action: 'publish' })
  get(@CallerParam() caller: Caller, @Param('name') name: string): Promise<AgentView> {
    return this.broker.get(caller.tenant, name);
  }

  @Delete(':name')
  @ApiRoute({
    summary: 'Remove an agent',
    params: NAME,
    responses: { 204: { description: 'removed' }, ...errors(404), ...GATED },
  })
  @GateRoute({ action: 'subscribe' })
  @HttpCode(204)
  async remove(@CallerParam() caller: Caller, @Param('name') name: string): Promise<void> {
    await this.broker.remove(caller.tenant, name);
  }

  /**
   * A mesh-subscriber agent's liveness heartbeat: its card lives on for EVENTMESH_AGENTS_HEARTBEAT_TTL_MS. A replica
   * names the registration it was started under (its PUT's answer); once the agent is registered again, its
   * heartbeats are refused 409 `STALE_REGISTRATION` and write nothing.
   */
  @Post(':name/heartbeat')
  @ApiRoute({
    summary: "A mesh-subscriber agent's liveness heartbeat",
    params: NAME,
    body: { schema: HEARTBEAT, required: false },
    responses: { 204: { description: 'recorded' }, ...errors(400, 404, 409), ...GATED },
  })
  @GateRoute({ action: 'subscribe' })
  @HttpCode(204)
  async heartbeat(@CallerParam() caller: Caller, @Param('name') name: string, @Body() body: unknown): Promise<void> {
    const { registration } = parseBody(HEARTBEAT, body ?? {});
    await this.broker.heartbeat(caller.tenant, name, registration);
  }

  /**
   * A mesh-subscriber agent's update of a task it received on its request topic: state, status message, artifacts
   * (libs/a2a/tasks/agent-updates.ts). 409 `ILLEGAL_TRANSITION` for a transition the rules refuse (the task ended).
   */
  @Post(':name/tasks/:id/updates')
  @ApiRoute({
    summary: "A mesh-subscriber agent's update of one of its tasks (state, status message, artifacts)",
    params: { ...NAME, id: "the task's id" },
    body: { schema: AGENT_UPDATE },
    responses: {
      200: {
        description: 'recorded',
        schema: z.object({ taskId: z.string(), state: z.string(), version: z.number().int() }),
      },
      ...errors(400, 404, 409),
      ...GATED,
    },
  })
  @GateRoute({ action: 'subscribe' })
  @HttpCode(200)
  update(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Body() body: unknown,
  ): Promise<{ taskId: string; state: string; version: number }> {
    return this.broker.update(caller.tenant, name, id, body);
  }

  /** The card a stock A2A client starts from: the agent's, pointing at the mesh (libs/a2a/agents/agent-card.ts, meshCardOf). */
  @Get(':name/.well-known/agent-card.json')
  @ApiRoute({
    summary: "The agent's card as served by the mesh (its endpoints are the mesh's)",
    params: NAME,
    responses: { 200: { description: 'the card', schema: z.looseObject({}) }, ...errors(404), ...GATED },
  })
  @GateRoute({ action: 'publish' })
  async card(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Req() request: FastifyRequest,
  ): Promise<Record<string, unknown>> {
    const agent = await this.broker.agent(caller.tenant, name);
    return this.broker.cardOf(agent, a2aUrlsOf(request, name), {
      tokens: this.gates.ingress.stats().filters.includes('token'),
    });
  }
}
