import { Controller, Get, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { RuntimeMetrics } from '@libs/metrics';
import { ApiRoute, errors, GATED, RouteDoc } from '../http/api-route';
import { GateRoute } from '../http/gate-route';
import { MetricsAccess } from './metrics-access';

const METRICS_TEXT = { description: 'the series in the Prometheus text format (0.0.4)', contentType: 'text/plain' };
const PUBLIC_DOC: RouteDoc = {
  summary: 'Metrics in the Prometheus text format',
  tags: ['operations'],
  responses: { 200: METRICS_TEXT, ...errors(401) },
};
const ADMIN_DOC: RouteDoc = { ...PUBLIC_DOC, responses: { 200: METRICS_TEXT, ...GATED } };

/**
 * `GET /metrics`: the instance's series in the Prometheus text format (libs/metrics), the Temporal core's merged
 * in. Which gate it passes is a setting (EVENTMESH_METRICS_ADMIN_GATE), so the module registers one of the two
 * controllers below, each declaring its gate; with EVENTMESH_METRICS_ENABLED=false it registers neither (404).
 */
abstract class MetricsEndpoint {
  constructor(
    private readonly metrics: RuntimeMetrics,
    private readonly access: MetricsAccess,
  ) {}

  protected async render(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    this.access.check(request.headers);
    const text = await this.metrics.scrape({ subscriptionLabels: this.access.subscriptionLabels });
    await reply.header('content-type', this.metrics.contentType).header('cache-control', 'no-store').send(text);
  }
}

/**
 * Public, as /health is: Prometheus scrapes without credentials (serve it on a network only Prometheus reaches), or
 * with the scrape secret (EVENTMESH_METRICS_SCRAPE_SECRET).
 */
@Controller('metrics')
@GateRoute({ public: true })
export class MetricsController extends MetricsEndpoint {
  constructor(metrics: RuntimeMetrics, access: MetricsAccess) {
    super(metrics, access);
  }

  @Get()
  @ApiRoute(PUBLIC_DOC)
  async scrape(@Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    await this.render(request, reply);
  }
}

/** EVENTMESH_METRICS_ADMIN_GATE=true: the admin gate, an admin of the operator tenant (as the runtime-wide admin routes). */
@Controller('metrics')
@GateRoute({ action: 'admin', admin: true, operator: true })
export class AdminMetricsController extends MetricsEndpoint {
  constructor(metrics: RuntimeMetrics, access: MetricsAccess) {
    super(metrics, access);
  }

  @Get()
  @ApiRoute(ADMIN_DOC)
  async scrape(@Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    await this.render(request, reply);
  }
}
