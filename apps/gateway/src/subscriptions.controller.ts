import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { DeadLetterView, SubscriptionService, SubscriptionView } from '../../../libs/subscriptions';

/** The subscriptions resource (CloudEvents Subscriptions API shape). */
@Controller('subscriptions')
export class SubscriptionsController {
  constructor(private readonly subscriptions: SubscriptionService) {}

  @Post()
  @HttpCode(201)
  create(@Body() body: unknown): Promise<SubscriptionView> {
    return this.subscriptions.create(body);
  }

  @Get()
  list(): Promise<SubscriptionView[]> {
    return this.subscriptions.list();
  }

  @Get(':id')
  get(@Param('id') id: string): Promise<SubscriptionView> {
    return this.subscriptions.get(id);
  }

  @Put(':id')
  replace(@Param('id') id: string, @Body() body: unknown): Promise<SubscriptionView> {
    return this.subscriptions.replace(id, body);
  }

  @Get(':id/dead-letters')
  deadLetters(@Param('id') id: string): Promise<DeadLetterView[]> {
    return this.subscriptions.deadLetters(id);
  }

  @Delete(':id')
  @HttpCode(204)
  async delete(@Param('id') id: string): Promise<void> {
    await this.subscriptions.delete(id);
  }
}
