import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { DeadLetterView, SubscriptionService, SubscriptionView } from '../../../libs/subscriptions';
import { GateRoute } from './gate-route';

const BY_ID = { action: 'subscribe', topic: { subscriptionParam: 'id' } } as const;

/** The subscriptions resource (CloudEvents Subscriptions API shape). */
@Controller('subscriptions')
export class SubscriptionsController {
  constructor(private readonly subscriptions: SubscriptionService) {}

  @Post()
  @GateRoute({ action: 'subscribe', topic: { body: 'topic' }, createsSubscription: true })
  @HttpCode(201)
  create(@Body() body: unknown): Promise<SubscriptionView> {
    return this.subscriptions.create(body);
  }

  @Get()
  @GateRoute({ action: 'subscribe' })
  list(): Promise<SubscriptionView[]> {
    return this.subscriptions.list();
  }

  @Get(':id')
  @GateRoute(BY_ID)
  get(@Param('id') id: string): Promise<SubscriptionView> {
    return this.subscriptions.get(id);
  }

  @Put(':id')
  @GateRoute(BY_ID)
  replace(@Param('id') id: string, @Body() body: unknown): Promise<SubscriptionView> {
    return this.subscriptions.replace(id, body);
  }

  @Get(':id/dead-letters')
  @GateRoute(BY_ID)
  deadLetters(@Param('id') id: string): Promise<DeadLetterView[]> {
    return this.subscriptions.deadLetters(id);
  }

  @Delete(':id')
  @GateRoute(BY_ID)
  @HttpCode(204)
  async delete(@Param('id') id: string): Promise<void> {
    await this.subscriptions.delete(id);
  }
}
