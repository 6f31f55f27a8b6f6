import { Controller, Get, Inject } from '@nestjs/common';
import { z } from 'zod';
import { Caller, TenantQuotaAdmin } from '@libs/security';
import { ApiRoute, GATED } from '../http/api-route';
import { CallerParam, GateRoute, Gates } from '../http/gate-route';

/** The runtime's own bounds on a request, as configured (EVENTMESH_HTTP_BODY_LIMIT_BYTES, EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS). */
export interface RuntimeLimits {
  maxBodyBytes: number;
  maxBatchEvents: number;
}

export const RUNTIME_LIMITS = Symbol('RuntimeLimits');

const count = z.number().int();
const burstSchema = z
  .object({
    events: count.describe('events per publish at most: eventsPerSecond x burstSeconds'),
    bytes: count.describe('bytes per publish at most: bytesPerSecond x burstSeconds'),
    eventsPerSecond: count,
    bytesPerSecond: count,
    burstSeconds: count,
  })
  .strict();
export const limitsSchema = z
  .object({
    tenant: z.string(),
    maxBodyBytes: count.describe("a request body's bytes at most (413 PAYLOAD_TOO_LARGE above)"),
    maxBatchEvents: count.describe('events in one `application/cloudevents-batch+json` publish at most (400 above)'),
    burst: burstSchema
      .nullable()
      .describe("the tenant's publish burst (413 BATCH_EXCEEDS_BURST above); null when the gate runs no quota"),
    maxPublish: z
      .object({ events: count, bytes: count })
      .strict()
      .describe('the largest publish that can pass: the least of the above'),
  })
  .strict();
export type LimitsView = z.infer<typeof limitsSchema>;

/**
 * `GET /limits`: what a client needs to size its publishes without guessing (split a batch before the runtime
 * refuses it): the body and batch bounds of the runtime, and the caller tenant's burst when the quota runs.
 */
@Controller('limits')
export class LimitsController {
  constructor(
    @Inject(RUNTIME_LIMITS) private readonly limits: RuntimeLimits,
    private readonly quotas: TenantQuotaAdmin,
    private readonly gates: Gates,
  ) {}

  @Get()
  @ApiRoute({
    summary: "The runtime's request limits and the caller tenant's publish burst",
    tags: ['events'],
    responses: { 200: { description: 'the limits', schema: limitsSchema }, ...GATED },
  })
  @GateRoute({ action: 'publish' })
  async get(@CallerParam() caller: Caller): Promise<LimitsView> {
    const { maxBodyBytes, maxBatchEvents } = this.limits;
    const burst = this.gates.ingress.stats().filters.includes('quota')
      ? burstOf((await this.quotas.get(caller, caller.tenant)).quota)
      : null;
    return {
      tenant: caller.tenant,
      maxBodyBytes,
      maxBatchEvents,
      burst,
      maxPublish: {
        events: Math.min(maxBatchEvents, burst?.events ?? Infinity),
        bytes: Math.min(maxBodyBytes, burst?.bytes ?? Infinity),
      },
    };
  }
}

/** The largest publish a quota lets through (the gate's BATCH_EXCEEDS_BURST bound, libs/security/tenant-quota-filter.ts). */
function burstOf(q: {
  eventsPerSecond: number;
  bytesPerSecond: number;
  burstSeconds: number;
}): NonNullable<LimitsView['burst']> {
  return {
    events: Math.floor(q.eventsPerSecond * q.burstSeconds),
    bytes: Math.floor(q.bytesPerSecond * q.burstSeconds),
    eventsPerSecond: q.eventsPerSecond,
    bytesPerSecond: q.bytesPerSecond,
    burstSeconds: q.burstSeconds,
  };
}
