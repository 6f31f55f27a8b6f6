import { Controller, Get, Query } from '@nestjs/common';
import { z } from 'zod';
import { TENANT_NAME } from '@libs/config';
import type { Caller } from '@libs/security';
import { AgentView, SessionServer, TenantSessionUsage } from '@libs/sessions';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { CallerParam, GateRoute } from '../http/gate-route';
import { parseQuery } from '../http/parse-body';

const QUERY = z.object({
  tenant: z
    .union([z.literal('*'), z.string().regex(TENANT_NAME)])
    .optional()
    .describe("another tenant, or `*` for every tenant (the operator tenant's admins only)"),
});
const usageSchema = z.object({ sessions: z.number(), agents: z.number(), bytes: z.number() });

const sessionViewSchema = z.object({
  session: z.string(),
  since: z.string(),
  window: z.number().describe('its credit window, bytes'),
  inFlight: z.number().describe('bytes of its chunks on the way now (at most the window)'),
  bytes: z.number(),
  chunks: z.number(),
  stalls: z.number().describe("times the agent's credit fell below one largest chunk"),
  call: z.number().describe('the call under way (0: none)'),
});
const agentsViewSchema = z.object({
  usage: z
    .array(
      usageSchema.extend({
        tenant: z.string(),
        here: usageSchema.describe('held through this gateway process'),
        others: z
          .array(usageSchema.extend({ holder: z.string(), instance: z.string() }))
          .describe("each other gateway process's, as of its last renewal"),
      }),
    )
    .describe("the tenants' quota usage across the runtime (sessions, agent replicas, bytes of windows in flight)"),
  agents: z.array(
    z.object({
      tenant: z.string(),
      agent: z.string(),
      replicas: z.array(
        z.object({
          replica: z.string(),
          instance: z.string(),
          holder: z.string(),
          since: z.string(),
          sessions: z.number(),
          bytes: z.number(),
          chunks: z.number(),
          stalls: z.number(),
          openSessions: z.array(sessionViewSchema),
        }),
      ),
    }),
  ),
});

/**
 * `GET /admin/sessions`: the caller tenant's (an operator's: another's, or every tenant's) quota usage, and its
 * session agents with their replicas across the cluster and each replica's open sessions (age, window, bytes in
 * flight, bytes and chunks sent, credit stalls); another process's figures are as of its last renewal (a second or
 * less). docs/streaming-sessions.md#operations.
 */
@Controller('admin/sessions')
@GateRoute({ action: 'admin', admin: true })
export class SessionsAdminController {
  constructor(private readonly sessions: SessionServer) {}

  @Get()
  @ApiRoute({
    summary: "A tenant's session quota usage, its agents, their replicas and open sessions",
    tags: ['admin'],
    query: QUERY,
    responses: { 200: { description: 'the agents', schema: agentsViewSchema }, ...errors(400), ...GATED },
  })
  async list(
    @CallerParam() caller: Caller,
    @Query() query: unknown,
  ): Promise<{ usage: TenantSessionUsage[]; agents: AgentView[] }> {
    const tenant = this.sessions.tenantsFor(caller, parseQuery(QUERY, query).tenant);
    return { usage: this.sessions.quotaUsage(tenant), agents: await this.sessions.agents(tenant) };
  }
}
