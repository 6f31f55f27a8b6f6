import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import type { Caller } from '@libs/security';
import { ClusterClientView, DisconnectView, StreamClients } from '@libs/streams';
import {
  DeliveryStateView,
  OffsetsView,
  SeekView,
  seekSchema,
  SubscriptionDeliveryState,
  SubscriptionOffsets,
  SubscriptionService,
} from '@libs/subscriptions';
import { z } from 'zod';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { CallerParam, GateRoute } from '../http/gate-route';
import { parseBody } from '../http/parse-body';

/**
 * An operator's routes on one subscription of the caller's tenant (docs/operations.md#rewinding-and-pausing-a-subscription):
 * its offsets per partition, seeking them, pausing and resuming its delivery, its stream clients across the cluster
 * and disconnecting one. They pass the admin gate (its audit
 * records every decision when configured to), and each change is also logged with its caller.
 */
const OPERATE = { action: 'admin', admin: true, topic: { subscriptionParam: 'id' } } as const;

const ID = { id: "the subscription's id" };
const nullableInt = z.number().int().nullable();
const offsetsViewSchema = z.looseObject({
  subscriptionId: z.string(),
  topic: z.string(),
  status: z.string(),
  topology: z.string(),
  generation: z.number().int().describe('how many seeks moved the offsets so far'),
  partitions: z.array(
    z.looseObject({
      partition: z.number().int(),
      committed: nullableInt.describe('the next offset not settled; null: nothing stored yet'),
      start: z.number().int(),
      end: z.number().int().describe('the high-water offset'),
      lag: z.number().int(),
      owner: z.string().nullable(),
      epoch: nullableInt,
    }),
  ),
});
const seekViewSchema = z.looseObject({
  subscriptionId: z.string(),
  topic: z.string(),
  to: z.string(),
  generation: z.number().int(),
  partitions: z.array(z.looseObject({ partition: z.number().int(), from: nullableInt, to: z.number().int() })),
  parkedForgotten: z.number().int(),
});
const deliveryStateSchema = z.looseObject({
  subscriptionId: z.string(),
  status: z.enum(['ACTIVE', 'PAUSED']),
  changed: z.boolean(),
});
const clientsSchema = z.looseObject({
  subscriptionId: z.string(),
  clients: z.array(
    z.looseObject({
      clientId: z.string(),
      transport: z.string(),
      window: z.number().int(),
      inFlight: z.number().int(),
      since: z.string(),
      instance: z.string(),
      holder: z.string(),
    }),
  ),
});
const disconnectSchema = z.looseObject({
  subscriptionId: z.string(),
  clientId: z.string(),
  instance: z.string(),
  disconnected: z.literal(true),
});

@Controller('subscriptions')
export class SubscriptionOperationsController {
  constructor(
    private readonly offsets: SubscriptionOffsets,
    private readonly state: SubscriptionDeliveryState,
    private readonly streamClients: StreamClients,
    private readonly subscriptions: SubscriptionService,
  ) {}

  @Get(':id/offsets')
  @ApiRoute({
    summary: 'Per partition: committed offset, log start and end, lag, owner and epoch',
    params: ID,
    responses: { 200: { description: 'the offsets', schema: offsetsViewSchema }, ...errors(404), ...GATED },
  })
  @GateRoute(OPERATE)
  view(@Param('id') id: string, @CallerParam() caller: Caller): Promise<OffsetsView> {
    return this.offsets.view(id, caller.tenant);
  }

  @Post(':id/offsets/seek')
  @ApiRoute({
    summary: "Move the offsets to earliest, latest, a time, or explicit offsets (fenced against the loops' commits)",
    params: ID,
    body: { schema: seekSchema },
    responses: {
      200: { description: 'what moved, per partition', schema: seekViewSchema },
      ...errors(400, 404),
      ...GATED,
    },
  })
  @GateRoute(OPERATE)
  @HttpCode(200)
  seek(@Param('id') id: string, @Body() body: unknown, @CallerParam() caller: Caller): Promise<SeekView> {
    return this.offsets.seek(id, parseBody(seekSchema, body), caller.tenant, caller.principal);
  }

  @Post(':id/pause')
  @ApiRoute({
    summary: 'Pause delivery (survives restarts)',
    params: ID,
    responses: { 200: { description: 'the state', schema: deliveryStateSchema }, ...errors(404, 409), ...GATED },
  })
  @GateRoute(OPERATE)
  @HttpCode(200)
  pause(@Param('id') id: string, @CallerParam() caller: Caller): Promise<DeliveryStateView> {
    return this.state.pause(id, caller.tenant, caller.principal);
  }

  @Post(':id/resume')
  @ApiRoute({
    summary: 'Resume delivery from the committed offsets',
    params: ID,
    responses: { 200: { description: 'the state', schema: deliveryStateSchema }, ...errors(404, 409), ...GATED },
  })
  @GateRoute(OPERATE)
  @HttpCode(200)
  resume(@Param('id') id: string, @CallerParam() caller: Caller): Promise<DeliveryStateView> {
    return this.state.resume(id, caller.tenant, caller.principal);
  }

  @Get(':id/clients')
  @ApiRoute({
    summary: 'The stream clients of the subscription on every instance',
    params: ID,
    responses: { 200: { description: 'the clients', schema: clientsSchema }, ...errors(404), ...GATED },
  })
  @GateRoute(OPERATE)
  async clients(
    @Param('id') id: string,
    @CallerParam() caller: Caller,
  ): Promise<{ subscriptionId: string; clients: ClusterClientView[] }> {
    await this.subscriptions.get(id, caller.tenant);
    return { subscriptionId: id, clients: await this.streamClients.list(id) };
  }

  @Delete(':id/clients/:clientId')
  @ApiRoute({
    summary: 'Disconnect one stream client wherever it is held',
    params: { ...ID, clientId: "the client's id" },
    responses: { 200: { description: 'disconnected', schema: disconnectSchema }, ...errors(404), ...GATED },
  })
  @GateRoute(OPERATE)
  async disconnect(
    @Param('id') id: string,
    @Param('clientId') clientId: string,
    @CallerParam() caller: Caller,
  ): Promise<DisconnectView> {
    await this.subscriptions.get(id, caller.tenant);
    return this.streamClients.disconnect(id, clientId, caller.principal);
  }
}
