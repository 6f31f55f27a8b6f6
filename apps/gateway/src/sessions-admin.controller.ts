import { Controller, Get } from '@nestjs/common';
import { z } from 'zod';
import type { Caller } from '../../../libs/security';
import { AgentView, SessionServer } from '../../../libs/sessions';
import { ApiRoute, GATED } from './api-route';
import { CallerParam, GateRoute } from './gate-route';

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
 * `GET /admin/sessions`: the caller tenant's session agents with their replicas across the cluster and each replica's
 * open sessions (age, window, bytes in flight, bytes and chunks sent, credit stalls); another process's figures are
 * as of its last renewal (a second or less). docs/streaming-sessions.md#operations.
 */
@Controller('admin/sessions')
@GateRoute({ action: 'admin', admin: true })
export class SessionsAdminController {
  constructor(private readonly sessions: SessionServer) {}

  @Get()
  @ApiRoute({
    summary: "The caller tenant's session agents, their replicas and open sessions",
    tags: ['admin'],
    responses: { 200: { description: 'the agents', schema: agentsViewSchema }, ...GATED },
  })
  async list(@CallerParam() caller: Caller): Promise<{ agents: AgentView[] }> {
    return { agents: await this.sessions.agents(caller.tenant) };
  }
}
