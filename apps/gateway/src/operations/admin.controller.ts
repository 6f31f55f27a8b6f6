import { Body, Controller, Get, HttpCode, Inject, Param, Post } from '@nestjs/common';
import { z } from 'zod';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { OwnershipAdmin, PartitionsView } from '@libs/ownership';
import { MoveView, moveSubscriptionSchema, OrphansView, SubscriptionPlacement } from '@libs/subscriptions';
import type { PartitionMove } from '../../../../contracts';
import { parseBody } from '../http/parse-body';
import { GateRoute } from '../http/gate-route';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { moveViewSchema, orphansViewSchema, partitionMovesSchema, partitionsViewSchema } from '../http/api-schemas';

/** Runtime-wide operator routes: the admin gate, and an admin of the operator tenant. */
const OPERATOR = { action: 'admin', admin: true, operator: true } as const;

/** The OwnershipAdmin of this instance; absent in LOCAL_STICKY_PULL. */
export const OWNERSHIP_ADMIN = Symbol('OwnershipAdmin');

const drainBody = z.object({ drained: z.boolean().default(true) }).strict();
const moveBody = z.object({ to: z.string().min(1) }).strict();

/** A partition number in a path: its digits (anything else is a 400). */
const PARTITION = z.string().regex(/^\d+$/).describe('the partition number');

/**
 * Operator endpoints (docs/api.md). PARTITION_OWNED_PULL (docs/topologies.md): the current assignment, draining an
 * instance, moving a partition; each calls the coordinator workflow, the same as the Temporal UI would.
 * LOCAL_STICKY_PULL: orphaned subscriptions and moving a subscription to another instance.
 */
@Controller('admin')
@GateRoute(OPERATOR)
export class AdminController {
  constructor(
    @Inject(OWNERSHIP_ADMIN) private readonly admin: OwnershipAdmin | undefined,
    private readonly placement: SubscriptionPlacement,
  ) {}

  private ownership(): OwnershipAdmin {
    if (!this.admin) {
      throw new EventMeshError(
        ErrorCode.WrongTopology,
        'partition ownership exists only with EVENTMESH_DELIVERY_TOPOLOGY=PARTITION_OWNED_PULL',
        {
          topology: 'LOCAL_STICKY_PULL',
        },
      );
    }
    return this.admin;
  }

  @Get('partitions')
  @ApiRoute({
    summary: 'PARTITION_OWNED_PULL: the partition assignment',
    tags: ['admin'],
    responses: { 200: { description: 'the assignment', schema: partitionsViewSchema }, ...errors(409), ...GATED },
  })
  partitions(): Promise<PartitionsView> {
    return this.ownership().partitions();
  }

  @Post('instances/:instanceId/drain')
  @ApiRoute({
    summary: 'PARTITION_OWNED_PULL: drain an instance (or undrain it)',
    tags: ['admin'],
    params: { instanceId: 'the instance' },
    body: { schema: drainBody, required: false },
    responses: {
      200: { description: 'the partition moves', schema: partitionMovesSchema },
      ...errors(400, 409),
      ...GATED,
    },
  })
  @HttpCode(200)
  async drain(@Param('instanceId') instanceId: string, @Body() body: unknown): Promise<{ moves: PartitionMove[] }> {
    const { drained } = parseBody(drainBody, body);
    return { moves: await this.ownership().drain(instanceId, drained) };
  }

  @Post('partitions/:topic/:partition/move')
  @ApiRoute({
    summary: 'PARTITION_OWNED_PULL: move a partition to an instance',
    tags: ['admin'],
    params: { topic: 'the topic', partition: PARTITION },
    body: { schema: moveBody },
    responses: {
      200: { description: 'the partition moves', schema: partitionMovesSchema },
      ...errors(400, 409),
      ...GATED,
    },
  })
  @HttpCode(200)
  async move(
    @Param('topic') topic: string,
    @Param('partition') partition: string,
    @Body() body: unknown,
  ): Promise<{ moves: PartitionMove[] }> {
    const { to } = parseBody(moveBody, body);
    if (!PARTITION.safeParse(partition).success) {
      throw new EventMeshError(ErrorCode.InvalidRequest, `partition: expected a partition number, got "${partition}"`, {
        field: 'partition',
      });
    }
    return { moves: await this.ownership().move(topic, Number(partition), to) };
  }

  @Get('subscriptions/orphans')
  @ApiRoute({
    summary: 'LOCAL_STICKY_PULL: subscriptions whose instance is gone',
    tags: ['admin'],
    responses: { 200: { description: 'the orphans', schema: orphansViewSchema }, ...GATED },
  })
  orphans(): Promise<OrphansView> {
    return this.placement.orphans();
  }

  @Post('subscriptions/:id/move')
  @ApiRoute({
    summary: 'LOCAL_STICKY_PULL: move a subscription to another instance',
    tags: ['admin'],
    params: { id: 'the subscription id' },
    body: { schema: moveSubscriptionSchema },
    responses: { 200: { description: 'the move', schema: moveViewSchema }, ...errors(400, 404, 409), ...GATED },
  })
  @HttpCode(200)
  moveSubscription(@Param('id') id: string, @Body() body: unknown): Promise<MoveView> {
    return this.placement.move(id, parseBody(moveSubscriptionSchema, body));
  }
}
