import { Controller, Get, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { HealthReport, HealthService, LivenessReport, ReadinessReport } from '@libs/health';
import { GateRoute } from '../http/gate-route';
import { ApiRoute } from '../http/api-route';
import { healthReportSchema, livenessReportSchema, readinessReportSchema } from '../http/api-schemas';

/**
 * Health probes, public (docs/operations.md#health-probes). `/health/live` asks no backend; `/health/ready` and
 * `/health` share one round of backend checks per EVENTMESH_HEALTH_CHECK_CACHE_MS (HealthService), however
 * often they are called.
 */
@Controller('health')
@GateRoute({ public: true })
export class HealthController {
  constructor(private readonly health: HealthService) {}

  /** Each dependency with its state, stats and warnings; 200 when all are up, 503 otherwise. */
  @Get()
  @ApiRoute({
    summary: 'Each dependency with its state',
    responses: {
      200: { description: 'all up', schema: healthReportSchema },
      503: { description: 'a dependency is down', schema: healthReportSchema },
    },
  })
  async check(@Res({ passthrough: true }) reply: FastifyReply): Promise<HealthReport> {
    const report = await this.health.check();
    void reply.status(report.status === 'up' ? 200 : 503);
    return report;
  }

  /** Liveness: the process answers (200); no backend is asked. */
  @Get('live')
  @ApiRoute({
    summary: 'Liveness: the process answers; no backend is asked',
    responses: { 200: { description: 'alive', schema: livenessReportSchema } },
  })
  live(): LivenessReport {
    return this.health.live();
  }

  /** Readiness: every dependency up and no dispatch loop stalled (200), else 503. */
  @Get('ready')
  @ApiRoute({
    summary: 'Readiness: every dependency up and no dispatch loop stalled',
    responses: {
      200: { description: 'ready', schema: readinessReportSchema },
      503: { description: 'a dependency is down or delivery is stalled', schema: readinessReportSchema },
    },
  })
  async ready(@Res({ passthrough: true }) reply: FastifyReply): Promise<ReadinessReport> {
    const report = await this.health.ready();
    void reply.status(report.status === 'up' ? 200 : 503);
    return report;
  }
}
