import { Body, Controller, Get, HttpCode, Inject, Param, Post } from '@nestjs/common';
import { z } from 'zod';
import { ErrorCode, EventMeshError } from '../../../libs/errors';
import { OwnershipAdmin, PartitionsView } from '../../../libs/ownership';
import { MoveView, moveSubscriptionSchema, OrphansView, SubscriptionPlacement } from '../../../libs/subscriptions';
import type { PartitionMove } from '../../../workflows';
import { parseBody } from './parse-body';
import { GateRoute } from './gate-route';

/** Runtime-wide operator routes: the admin gate, and an admin of the operator tenant. */
const OPERATOR = { action: 'admin', admin: true, operator: true } as const;

/** The OwnershipAdmin of this instance; absent in LOCAL_STICKY_PULL. */
export const OWNERSHIP_ADMIN = Symbol('OwnershipAdmin');

const drainBody = z.object({ drained: z.boolean().default(true) }).strict();
const moveBody = z.object({ to: z.string().min(1) }).strict();

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
      throw new EventMeshError(ErrorCode.WrongTopology, 'partition ownership exists only with EVENTMESH_DELIVERY_TOPOLOGY=PARTITION_OWNED_PULL', {
        topology: 'LOCAL_STICKY_PULL',
      });
    }
    return this.admin;
  }

  @Get('partitions')
  partitions(): Promise<PartitionsView> {
    return this.ownership().partitions();
  }

  @Post('instances/:instanceId/drain')
  @HttpCode(200)
  async drain(@Param('instanceId') instanceId: string, @Body() body: unknown): Promise<{ moves: PartitionMove[] }> {
    const { drained } = parseBody(drainBody, body);
    return { moves: await this.ownership().drain(instanceId, drained) };
  }

  @Post('partitions/:topic/:partition/move')
  @HttpCode(200)
  async move(@Param('topic') topic: string, @Param('partition') partition: string, @Body() body: unknown): Promise<{ moves: PartitionMove[] }> {
    const { to } = parseBody(moveBody, body);
    if (!/^\d+$/.test(partition)) {
      throw new EventMeshError(ErrorCode.InvalidRequest, `partition: expected a partition number, got "${partition}"`, { field: 'partition' });
    }
    return { moves: await this.ownership().move(topic, Number(partition), to) };
  }

  @Get('subscriptions/orphans')
  orphans(): Promise<OrphansView> {
    return this.placement.orphans();
  }

  @Post('subscriptions/:id/move')
  @HttpCode(200)
  moveSubscription(@Param('id') id: string, @Body() body: unknown): Promise<MoveView> {
    return this.placement.move(id, parseBody(moveSubscriptionSchema, body));
  }
}
