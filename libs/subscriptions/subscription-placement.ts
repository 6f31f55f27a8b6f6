import type { DataSource } from 'typeorm';
import { z } from 'zod';
import type { EventMeshConfig, OrphanTakeoverMode } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { PlacementStore } from '@libs/storage';

/** An orphaned subscription as operators see it (`GET /admin/subscriptions/orphans`). */
export interface OrphanView {
  subscription: string;
  topic: string;
  protocol: string;
  /** The instance it is pinned to, whose dispatch run is not live. */
  instance: string;
  /** When that instance's dispatch run last renewed itself; null when it never ran. */
  lastRenewedAt: string | null;
  orphanedSince: string;
}

export interface OrphansView {
  graceMs: number;
  takeover: OrphanTakeoverMode;
  /** Instances whose dispatch run is live: the possible targets of a move. */
  liveInstances: string[];
  orphans: OrphanView[];
}

/** The answer to a move: where the subscription was and is, and the epoch the old instance's run is fenced at. */
export interface MoveView {
  subscription: string;
  from: string;
  to: string;
  moved: boolean;
  /** The epoch of `from`'s dispatch run after the move; null when nothing moved (it was already on `to`). */
  fencedEpoch: number | null;
}

/** `POST /admin/subscriptions/{id}/move`. */
export const moveSubscriptionSchema = z
  .object({
    to: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'an instance id: 1 to 64 characters of [A-Za-z0-9._-]'),
    /** Move only if the subscription is still on this instance (an operator's guard against a concurrent move). */
    from: z.string().min(1).optional(),
    /** Move even to an instance whose dispatch run is not live (one about to start). */
    force: z.boolean().default(false),
  })
  .strict();
export type MoveSubscriptionRequest = z.infer<typeof moveSubscriptionSchema>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Orphaned subscriptions of LOCAL_STICKY_PULL, and an operator's move of a subscription to another instance
 * (docs/topologies.md#orphaned-subscriptions). The move itself, and its fence, are {@link PlacementStore.move}.
 */
export class SubscriptionPlacement {
  private readonly log = createLogger('SubscriptionPlacement');

  constructor(
    private readonly store: PlacementStore,
    private readonly options: Pick<EventMeshConfig['delivery'], 'topology' | 'orphanGraceMs' | 'orphanTakeover'>,
  ) {}

  static forInstance(db: DataSource, config: EventMeshConfig): SubscriptionPlacement {
    return new SubscriptionPlacement(
      new PlacementStore(db, Math.floor(config.delivery.leaseTtlMs / 2)),
      config.delivery,
    );
  }

  private sticky(): void {
    if (this.options.topology !== 'LOCAL_STICKY_PULL') {
      throw new EventMeshError(
        ErrorCode.WrongTopology,
        'subscriptions are pinned to instances only in LOCAL_STICKY_PULL; in PARTITION_OWNED_PULL the owner of a partition delivers it',
        { topology: this.options.topology },
      );
    }
  }

  async orphans(): Promise<OrphansView> {
    this.sticky();
    const [rows, liveInstances] = await Promise.all([
      this.store.orphans(this.options.orphanGraceMs),
      this.store.liveInstances(this.options.orphanGraceMs),
    ]);
    return {
      graceMs: this.options.orphanGraceMs,
      takeover: this.options.orphanTakeover,
      liveInstances,
      orphans: rows.map((r) => ({
        subscription: r.subscriptionId,
        topic: r.topic,
        protocol: r.protocol,
        instance: r.instanceId,
        lastRenewedAt: r.lastRenewedAt?.toISOString() ?? null,
        orphanedSince: r.orphanedSince.toISOString(),
      })),
    };
  }

  /** What `/health` says about orphans: their count, and a warning while there are any (LOCAL_STICKY_PULL only). */
  async health(): Promise<{
    stats: Record<string, unknown>;
    warnings: { code: string; message: string; [detail: string]: unknown }[];
  }> {
    if (this.options.topology !== 'LOCAL_STICKY_PULL') return { stats: {}, warnings: [] };
    const orphans = await this.store.orphans(this.options.orphanGraceMs);
    const instances = [...new Set(orphans.map((o) => o.instanceId))];
    return {
      stats: {
        orphans: {
          count: orphans.length,
          instances,
          graceMs: this.options.orphanGraceMs,
          takeover: this.options.orphanTakeover,
        },
      },
      warnings:
        orphans.length === 0
          ? []
          : [
              {
                code: 'ORPHANED_SUBSCRIPTIONS',
                message:
                  `${orphans.length} subscription(s) pinned to instance(s) with no live dispatch run (${instances.join(', ')}) are not delivered; ` +
                  (this.options.orphanTakeover === 'AUTOMATIC'
                    ? 'a live instance takes them over'
                    : 'move them with POST /admin/subscriptions/{id}/move (EVENTMESH_DELIVERY_ORPHAN_TAKEOVER=MANUAL)'),
                count: orphans.length,
                since: orphans[0].orphanedSince.toISOString(),
              },
            ],
    };
  }

  /**
   * Moves a subscription to instance `to`, fencing the dispatch run of the instance it was on. 404 for an unknown
   * subscription; 409 INSTANCE_NOT_LIVE when `to` has no live dispatch run (unless `force`); 409
   * PLACEMENT_CONFLICT when it is not on `from` (or another move won). Already on `to`: nothing changes.
   */
  async move(id: string, request: MoveSubscriptionRequest): Promise<MoveView> {
    this.sticky();
    const current = UUID.test(id) ? await this.store.instanceOf(id) : undefined;
    if (current === undefined)
      throw new EventMeshError(ErrorCode.SubscriptionNotFound, `subscription ${id} does not exist`, { id });
    const from = request.from ?? current;
    if (from !== current) throw conflict(id, from, current);
    if (from === request.to) return { subscription: id, from, to: request.to, moved: false, fencedEpoch: null };
    const result = await this.store.move(id, from, request.to, {
      graceMs: this.options.orphanGraceMs,
      force: request.force,
    });
    if (result.moved) {
      const { move } = result;
      this.log.warn(
        { subscription: id, from: move.from, to: move.to, epoch: move.fencedEpoch, forced: request.force },
        "subscription moved by an operator; the old instance's dispatch run is fenced",
      );
      return { subscription: id, from: move.from, to: move.to, moved: true, fencedEpoch: move.fencedEpoch };
    }
    switch (result.rejected) {
      case 'SUBSCRIPTION_GONE':
        throw new EventMeshError(ErrorCode.SubscriptionNotFound, `subscription ${id} does not exist`, { id });
      case 'MOVED_CONCURRENTLY':
        throw conflict(id, from, result.current);
      case 'TARGET_NOT_LIVE':
        throw new EventMeshError(
          ErrorCode.InstanceNotLive,
          `instance ${request.to} has no live dispatch run (none renewed within ${this.options.orphanGraceMs} ms), so nobody would deliver ` +
            `subscription ${id} there; send "force": true to move it anyway`,
          { subscription: id, to: request.to, graceMs: this.options.orphanGraceMs },
        );
    }
  }
}

function conflict(id: string, from: string, current: string | undefined): EventMeshError {
  return new EventMeshError(ErrorCode.PlacementConflict, `subscription ${id} is on instance ${current}, not ${from}`, {
    subscription: id,
    from,
    current,
  });
}
