import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@libs/security';
import { z } from 'zod';
import {
  createSubscriptionSchema,
  ensureSubscription,
  replaceSubscriptionSchema,
  subscriptionNameSchema,
  SubscriptionService,
  SubscriptionView,
} from '@libs/subscriptions';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { subscriptionViewSchema } from '../http/api-schemas';
import { CallerParam, GateRoute } from '../http/gate-route';

const BY_ID = { action: 'subscribe', topic: { subscriptionParam: 'id' } } as const;
const ID = { id: 'the subscription id' };
const VIEW = { description: 'the subscription', schema: subscriptionViewSchema };
const CREATES = { action: 'subscribe', topic: { body: 'topic' }, createsSubscription: true } as const;
const listQuerySchema = z.object({ name: subscriptionNameSchema.optional().describe('only the one of this name') });

/**
 * The subscriptions resource (CloudEvents Subscriptions API shape), scoped by the caller's tenant: another
 * tenant's subscription answers 404 exactly like a missing one. Its dead letters: dead-letters.controller.ts.
 */
@Controller('subscriptions')
export class SubscriptionsController {
  constructor(private readonly subscriptions: SubscriptionService) {}

  @Post()
  @ApiRoute({
    summary: 'Create a subscription',
    body: { schema: createSubscriptionSchema },
    responses: {
      201: { ...VIEW, description: "created (an HTTP subscription's signing secret is shown this once)" },
      ...errors(400, 404, 409),
      ...GATED,
    },
  })
  @GateRoute(CREATES)
  @HttpCode(201)
  create(@Body() body: unknown, @CallerParam() caller: Caller): Promise<SubscriptionView> {
    return this.subscriptions.create(body, caller);
  }

  @Get()
  @ApiRoute({
    summary: "The caller's subscriptions",
    query: listQuerySchema,
    responses: { 200: { description: 'the list, oldest first', schema: z.array(subscriptionViewSchema) }, ...GATED },
  })
  @GateRoute({ action: 'subscribe' })
  list(@Query('name') name: string | undefined, @CallerParam() caller: Caller): Promise<SubscriptionView[]> {
    return this.subscriptions.list(caller.tenant, typeof name === 'string' ? name : undefined);
  }

  @Put('by-name/:name')
  @ApiRoute({
    summary: 'Ensure a subscription by its name',
    description:
      "Creates the caller's subscription of this name (201, as a create) or answers the one it has (200), its sink, filters and config replaced when the body's differ (its start position stays). Another topic or protocol than the named one's: 409 `SUBSCRIPTION_NAME_TAKEN`. Idempotent: processes ensuring one name at once end with one subscription.",
    params: { name: subscriptionNameSchema.describe("the subscription's name") },
    body: { schema: createSubscriptionSchema },
    responses: {
      200: { ...VIEW, description: 'it existed (replaced where the body differs)' },
      201: { ...VIEW, description: "created (an HTTP subscription's signing secret is shown this once)" },
      ...errors(400, 404, 409),
      ...GATED,
    },
  })
  @GateRoute(CREATES)
  async ensure(
    @Param('name') name: string,
    @Body() body: unknown,
    @CallerParam() caller: Caller,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<SubscriptionView> {
    const { created, subscription } = await ensureSubscription(this.subscriptions, name, body, caller);
    void reply.status(created ? 201 : 200);
    return subscription;
  }

  @Get(':id')
  @ApiRoute({ summary: 'One subscription', params: ID, responses: { 200: VIEW, ...errors(404), ...GATED } })
  @GateRoute(BY_ID)
  get(@Param('id') id: string, @CallerParam() caller: Caller): Promise<SubscriptionView> {
    return this.subscriptions.get(id, caller.tenant);
  }

  @Put(':id')
  @ApiRoute({
    summary: 'Replace a subscription',
    params: ID,
    body: { schema: replaceSubscriptionSchema },
    responses: { 200: VIEW, ...errors(400, 404), ...GATED },
  })
  @GateRoute(BY_ID)
  replace(@Param('id') id: string, @Body() body: unknown, @CallerParam() caller: Caller): Promise<SubscriptionView> {
    return this.subscriptions.replace(id, body, caller);
  }

  @Delete(':id')
  @ApiRoute({
    summary: 'Delete a subscription',
    params: ID,
    responses: { 204: { description: 'deleted' }, ...errors(404), ...GATED },
  })
  @GateRoute(BY_ID)
  @HttpCode(204)
  async delete(@Param('id') id: string, @CallerParam() caller: Caller): Promise<void> {
    await this.subscriptions.delete(id, caller.tenant);
  }
}
