import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import type { Caller } from '../../../libs/security';
import { ClusterClientView, DisconnectView, StreamClients } from '../../../libs/streams';
import {
  DeliveryStateView,
  OffsetsView,
  SeekView,
  seekSchema,
  SubscriptionDeliveryState,
  SubscriptionOffsets,
  SubscriptionService,
} from '../../../libs/subscriptions';
import { CallerParam, GateRoute } from './gate-route';
import { parseBody } from './parse-body';

/**
 * An operator's routes on one subscription of the caller's tenant (docs/operations.md#rewinding-and-pausing-a-subscription):
 * its offsets per partition, seeking them, pausing and resuming its delivery, its stream clients across the cluster
 * and disconnecting one. They pass the admin gate (its audit
 * records every decision when configured to), and each change is also logged with its caller.
 */
const OPERATE = { action: 'admin', admin: true, topic: { subscriptionParam: 'id' } } as const;

@Controller('subscriptions')
export class SubscriptionOperationsController {
  constructor(
    private readonly offsets: SubscriptionOffsets,
    private readonly state: SubscriptionDeliveryState,
    private readonly streamClients: StreamClients,
    private readonly subscriptions: SubscriptionService,
  ) {}

  @Get(':id/offsets')
  @GateRoute(OPERATE)
  view(@Param('id') id: string, @CallerParam() caller: Caller): Promise<OffsetsView> {
    return this.offsets.view(id, caller.tenant);
  }

  @Post(':id/offsets/seek')
  @GateRoute(OPERATE)
  @HttpCode(200)
  seek(@Param('id') id: string, @Body() body: unknown, @CallerParam() caller: Caller): Promise<SeekView> {
    return this.offsets.seek(id, parseBody(seekSchema, body), caller.tenant, caller.principal);
  }

  @Post(':id/pause')
  @GateRoute(OPERATE)
  @HttpCode(200)
  pause(@Param('id') id: string, @CallerParam() caller: Caller): Promise<DeliveryStateView> {
    return this.state.pause(id, caller.tenant, caller.principal);
  }

  @Post(':id/resume')
  @GateRoute(OPERATE)
  @HttpCode(200)
  resume(@Param('id') id: string, @CallerParam() caller: Caller): Promise<DeliveryStateView> {
    return this.state.resume(id, caller.tenant, caller.principal);
  }

  @Get(':id/clients')
  @GateRoute(OPERATE)
  async clients(@Param('id') id: string, @CallerParam() caller: Caller): Promise<{ subscriptionId: string; clients: ClusterClientView[] }> {
    await this.subscriptions.get(id, caller.tenant);
    return { subscriptionId: id, clients: await this.streamClients.list(id) };
  }

  @Delete(':id/clients/:clientId')
  @GateRoute(OPERATE)
  async disconnect(@Param('id') id: string, @Param('clientId') clientId: string, @CallerParam() caller: Caller): Promise<DisconnectView> {
    await this.subscriptions.get(id, caller.tenant);
    return this.streamClients.disconnect(id, clientId, caller.principal);
  }
}
