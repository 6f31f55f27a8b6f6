import { Body, Controller, Delete, Get, HttpCode, Param, Post, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import type { Caller } from '@libs/security';
import { topicGrantSchema, TopicGrantView, TopicNamespace } from '@libs/topics';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { CallerParam, GateRoute } from '../http/gate-route';
import { requiredBody } from '../http/parse-body';

const grantSchema = z.object({
  topic: z.string(),
  tenant: z.string(),
  action: z.enum(['publish', 'subscribe']),
  grantedBy: z.string(),
  createdAt: z.string(),
});

/**
 * The operator's grants of its shared topics to tenants (libs/topics, docs/security.md): with
 * EVENTMESH_KAFKA_SHARED_TOPIC_ACCESS=GRANTED a tenant publishes to, or subscribes to, a shared topic only with one.
 * The operator tenant's admins only; the admin gate audits every decision.
 */
@Controller('admin/topics')
@GateRoute({ action: 'admin', admin: true, operator: true })
export class TopicGrantsController {
  constructor(private readonly namespace: TopicNamespace) {}

  @Post(':topic/grants')
  @ApiRoute({
    summary: 'Grant a tenant publish or subscribe on a shared topic',
    tags: ['admin'],
    params: { topic: 'the shared topic' },
    body: { schema: topicGrantSchema },
    responses: {
      201: { description: 'granted', schema: grantSchema },
      200: { description: 'the tenant had the grant already', schema: grantSchema },
      ...errors(400, 404),
      ...GATED,
    },
  })
  async grant(
    @CallerParam() caller: Caller,
    @Param('topic') topic: string,
    @Body() body: unknown,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<TopicGrantView> {
    const { grant, created } = await this.namespace.grant(topic, requiredBody(body), caller.principal);
    reply.status(created ? 201 : 200);
    return grant;
  }

  @Get(':topic/grants')
  @ApiRoute({
    summary: "A shared topic's grants",
    tags: ['admin'],
    params: { topic: 'the shared topic' },
    responses: {
      200: { description: 'the grants', schema: z.object({ grants: z.array(grantSchema) }) },
      ...errors(404),
      ...GATED,
    },
  })
  async list(@Param('topic') topic: string): Promise<{ grants: TopicGrantView[] }> {
    return { grants: await this.namespace.listGrants(topic) };
  }

  @Delete(':topic/grants/:tenant/:action')
  @ApiRoute({
    summary: 'Revoke a grant',
    tags: ['admin'],
    params: {
      topic: 'the shared topic',
      tenant: 'the tenant',
      action: z.enum(['publish', 'subscribe']).describe('what the grant allows'),
    },
    responses: { 204: { description: 'revoked' }, ...errors(400, 404), ...GATED },
  })
  @HttpCode(204)
  async revoke(
    @Param('topic') topic: string,
    @Param('tenant') tenant: string,
    @Param('action') action: string,
  ): Promise<void> {
    await this.namespace.revoke(topic, tenant, action);
  }
}
