import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import type { Caller } from '../../../libs/security';
import { z } from 'zod';
import {
  createSubscriptionSchema,
  replaceSubscriptionSchema,
  SubscriptionService,
  SubscriptionView,
} from '../../../libs/subscriptions';
import { ApiRoute, errors, GATED } from './api-route';
import { subscriptionViewSchema } from './api-schemas';
import { CallerParam, GateRoute } from './gate-route';

const BY_ID = { action: 'subscribe', topic: { subscriptionParam: 'id' } } as const;
const ID = { id: 'the subscription id' };
const VIEW = { description: 'the subscription', schema: subscriptionViewSchema };

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
      ...errors(400, 404),
      ...GATED,
    },
  })
  @GateRoute({ action: 'subscribe', topic: { body: 'topic' }, createsSubscription: true })
  @HttpCode(201)
  create(@Body() body: unknown, @CallerParam() caller: Caller): Promise<SubscriptionView> {
    return this.subscriptions.create(body, caller);
  }

  @Get()
  @ApiRoute({
    summary: "The caller's subscriptions",
    responses: { 200: { description: 'the list', schema: z.array(subscriptionViewSchema) }, ...GATED },
  })
  @GateRoute({ action: 'subscribe' })
  list(@CallerParam() caller: Caller): Promise<SubscriptionView[]> {
    return this.subscriptions.list(caller.tenant);
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
