import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import type { Caller } from '../../../libs/security';
import { SubscriptionService, SubscriptionView } from '../../../libs/subscriptions';
import { CallerParam, GateRoute } from './gate-route';

const BY_ID = { action: 'subscribe', topic: { subscriptionParam: 'id' } } as const;

/**
 * The subscriptions resource (CloudEvents Subscriptions API shape), scoped by the caller's tenant: another
 * tenant's subscription answers 404 exactly like a missing one. Its dead letters: dead-letters.controller.ts.
 */
@Controller('subscriptions')
export class SubscriptionsController {
  constructor(private readonly subscriptions: SubscriptionService) {}

  @Post()
  @GateRoute({ action: 'subscribe', topic: { body: 'topic' }, createsSubscription: true })
  @HttpCode(201)
  create(@Body() body: unknown, @CallerParam() caller: Caller): Promise<SubscriptionView> {
    return this.subscriptions.create(body, caller.tenant);
  }

  @Get()
  @GateRoute({ action: 'subscribe' })
  list(@CallerParam() caller: Caller): Promise<SubscriptionView[]> {
    return this.subscriptions.list(caller.tenant);
  }

  @Get(':id')
  @GateRoute(BY_ID)
  get(@Param('id') id: string, @CallerParam() caller: Caller): Promise<SubscriptionView> {
    return this.subscriptions.get(id, caller.tenant);
  }

  @Put(':id')
  @GateRoute(BY_ID)
  replace(@Param('id') id: string, @Body() body: unknown, @CallerParam() caller: Caller): Promise<SubscriptionView> {
    return this.subscriptions.replace(id, body, caller.tenant);
  }

  @Delete(':id')
  @GateRoute(BY_ID)
  @HttpCode(204)
  async delete(@Param('id') id: string, @CallerParam() caller: Caller): Promise<void> {
    await this.subscriptions.delete(id, caller.tenant);
  }
}
