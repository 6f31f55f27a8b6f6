import { Controller, Get, Param } from '@nestjs/common';
import type { Caller } from '@libs/security';
import { SkippedRangeStore } from '@libs/storage';
import { subscriptionNotFound } from '@libs/subscriptions';
import { CallerParam, GateRoute } from '../http/gate-route';
import { z } from 'zod';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { skippedRangeViewSchema } from '../http/api-schemas';

/** One range of events a subscription never got (Kafka retention deleted them first), as the API shows it. */
export interface SkippedRangeView {
  topic: string;
  partition: number;
  /** The first offset skipped. */
  fromOffset: number;
  /** Where delivery resumed (not skipped). */
  toOffset: number;
  events: number;
  reason: string;
  firstRecordedAt: string;
  lastRecordedAt: string;
}

/**
 * `GET /subscriptions/{id}/skipped-ranges`: the events a subscription never got because Kafka retention deleted
 * them before delivery, by topic, partition and offset (docs/delivery.md, "Retention"). `/health` warns while
 * recent ones exist. Another tenant's subscription answers 404 like a missing one.
 */
@Controller('subscriptions')
export class SkippedRangesController {
  constructor(private readonly skipped: SkippedRangeStore) {}

  @Get(':id/skipped-ranges')
  @ApiRoute({
    summary: 'Events the subscription never got (Kafka retention deleted them first)',
    params: { id: 'the subscription id' },
    responses: {
      200: { description: 'the ranges', schema: z.array(skippedRangeViewSchema) },
      ...errors(404),
      ...GATED,
    },
  })
  @GateRoute({ action: 'subscribe', topic: { subscriptionParam: 'id' } })
  async list(@Param('id') id: string, @CallerParam() caller: Caller): Promise<SkippedRangeView[]> {
    const ranges = await this.skipped.listFor(id, caller.tenant);
    if (!ranges) throw subscriptionNotFound(id);
    return ranges.map((r) => ({
      topic: r.topic,
      partition: r.partition,
      fromOffset: r.fromOffset,
      toOffset: r.toOffset,
      events: r.events,
      reason: r.reason,
      firstRecordedAt: r.firstRecordedAt.toISOString(),
      lastRecordedAt: r.lastRecordedAt.toISOString(),
    }));
  }
}
