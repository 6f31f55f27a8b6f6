import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post } from '@nestjs/common';
import { z } from 'zod';
import type { Caller } from '@libs/security';
import { configureTopicSchema, createTopicSchema, TenantTopicView, TopicNamespace } from '@libs/topics';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { CallerParam, GateRoute } from '../http/gate-route';
import { requiredBody } from '../http/parse-body';

const topicSchema = z.object({
  name: z.string(),
  partitions: z.number().int(),
  retentionMs: z.number().int().nullable(),
  createdAt: z.string(),
});

/**
 * A tenant's own topics (libs/topics, docs/security.md): its admins create, list, configure and delete them; each name is the
 * tenant's, so another tenant's topic of the same name is another topic, never seen here.
 */
@Controller('topics')
@GateRoute({ action: 'admin', admin: true })
export class TopicsController {
  constructor(private readonly namespace: TopicNamespace) {}

  @Post()
  @ApiRoute({
    summary: "Create one of the tenant's own topics",
    tags: ['topics'],
    body: { schema: createTopicSchema },
    responses: { 201: { description: 'the topic', schema: topicSchema }, ...errors(400, 409, 503), ...GATED },
  })
  @HttpCode(201)
  create(@CallerParam() caller: Caller, @Body() body: unknown): Promise<TenantTopicView> {
    return this.namespace.create(caller.tenant, requiredBody(body));
  }

  @Get()
  @ApiRoute({
    summary: "The tenant's own topics (not the operator's shared ones)",
    tags: ['topics'],
    responses: { 200: { description: 'the topics', schema: z.object({ topics: z.array(topicSchema) }) }, ...GATED },
  })
  async list(@CallerParam() caller: Caller): Promise<{ topics: TenantTopicView[] }> {
    return { topics: await this.namespace.list(caller.tenant) };
  }

  @Get(':name')
  @ApiRoute({
    summary: "One of the tenant's own topics",
    tags: ['topics'],
    params: { name: 'the topic' },
    responses: { 200: { description: 'the topic', schema: topicSchema }, ...errors(404), ...GATED },
  })
  get(@CallerParam() caller: Caller, @Param('name') name: string): Promise<TenantTopicView> {
    return this.namespace.get(caller.tenant, name);
  }

  @Patch(':name')
  @ApiRoute({
    summary: "Grow the partitions or set the retention of one of the tenant's own topics",
    tags: ['topics'],
    params: { name: 'the topic' },
    body: { schema: configureTopicSchema },
    responses: { 200: { description: 'the topic', schema: topicSchema }, ...errors(400, 404, 503), ...GATED },
  })
  configure(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Body() body: unknown,
  ): Promise<TenantTopicView> {
    return this.namespace.configure(caller.tenant, name, requiredBody(body));
  }

  @Delete(':name')
  @ApiRoute({
    summary: "Delete one of the tenant's own topics, with its events",
    tags: ['topics'],
    params: { name: 'the topic' },
    responses: { 204: { description: 'deleted' }, ...errors(404, 409, 503), ...GATED },
  })
  @HttpCode(204)
  async delete(@CallerParam() caller: Caller, @Param('name') name: string): Promise<void> {
    await this.namespace.delete(caller.tenant, name);
  }
}
