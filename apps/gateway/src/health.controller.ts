import { Controller, Get, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { HealthReport, HealthService } from '../../../libs/health';
import { GateRoute } from './gate-route';

@Controller('health')
export class HealthController {
  constructor(private readonly health: HealthService) {}

  /** Each dependency with its state; 200 when all are up, 503 otherwise. */
  @Get()
  @GateRoute({ public: true })
  async check(@Res({ passthrough: true }) reply: FastifyReply): Promise<HealthReport> {
    const report = await this.health.check();
    void reply.status(report.status === 'up' ? 200 : 503);
    return report;
  }
}
