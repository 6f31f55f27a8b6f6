import { Controller, Get, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { HealthReport, HealthService } from '../../../libs/health';
import { GateRoute } from './gate-route';
import { ApiRoute } from './api-route';
import { healthReportSchema } from './api-schemas';

@Controller('health')
export class HealthController {
  constructor(private readonly health: HealthService) {}

  /** Each dependency with its state; 200 when all are up, 503 otherwise. */
  @Get()
  @ApiRoute({
    summary: 'Each dependency with its state',
    responses: { 200: { description: 'all up', schema: healthReportSchema }, 503: { description: 'a dependency is down', schema: healthReportSchema } },
  })
  @GateRoute({ public: true })
  async check(@Res({ passthrough: true }) reply: FastifyReply): Promise<HealthReport> {
    const report = await this.health.check();
    void reply.status(report.status === 'up' ? 200 : 503);
    return report;
  }
}
