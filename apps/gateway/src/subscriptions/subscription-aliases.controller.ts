import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { Caller } from '@libs/security';
import { createSubscriptionSchema, SubscriptionService, SubscriptionView } from '@libs/subscriptions';
import { z } from 'zod';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { subscriptionViewSchema } from '../http/api-schemas';
import { CallerParam, GateRoute } from '../http/gate-route';

/** `POST /events/subscribe` and `/events/unsubscribe`: the subscriptions resource under the names of the events API. */
@Controller('events')
export class SubscriptionAliasesController {
  constructor(private readonly subscriptions: SubscriptionService) {}

  /** Alias of `POST /subscriptions`. */
  @Post('subscribe')
  @ApiRoute({
    summary: 'Create a subscription (alias of POST /subscriptions)',
    body: { schema: createSubscriptionSchema },
    responses: { 201: { description: 'created', schema: subscriptionViewSchema }, ...errors(400, 404), ...GATED },
  })
  @GateRoute({ action: 'subscribe', topic: { body: 'topic' }, createsSubscription: true })
  @HttpCode(201)
  subscribe(@Body() body: unknown, @CallerParam() caller: Caller): Promise<SubscriptionView> {
    return this.subscriptions.create(body, caller);
  }

  /** Alias of `DELETE /subscriptions/{id}`: `{ "id": "..." }`. */
  @Post('unsubscribe')
  @ApiRoute({
    summary: 'Delete a subscription (alias of DELETE /subscriptions/{id})',
    body: { schema: z.object({ id: z.string() }) },
    responses: { 204: { description: 'deleted' }, ...errors(400, 404), ...GATED },
  })
  @GateRoute({ action: 'subscribe', topic: { subscriptionBody: 'id' } })
  @HttpCode(204)
  async unsubscribe(@Body() body: { id?: unknown } | undefined, @CallerParam() caller: Caller): Promise<void> {
    if (typeof body?.id !== 'string') {
      throw new EventMeshError(ErrorCode.InvalidRequest, 'id: the subscription id is required', { field: 'id' });
    }
    await this.subscriptions.delete(body.id, caller.tenant);
  }
}
