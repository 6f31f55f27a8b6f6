import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { HealthService } from '@libs/health';
import type { RuntimeMetrics } from '@libs/metrics';
import { gateHeadersOf, type SecurityGate } from '@libs/security';
import { MetricsAccess } from '../../gateway/src/operations/metrics-access';
import { answerError, answerJson } from '../../gateway/src/http/raw-answer';
import { REQUEST_ID_HEADER, RequestLog } from '../../gateway/src/http/request-log';

export interface OpsServerOptions {
  host: string;
  port: number;
  health: HealthService;
  /** Absent with EVENTMESH_METRICS_ENABLED=false: `/metrics` is 404, as on the gateway. */
  metrics?: RuntimeMetrics;
  /** EVENTMESH_METRICS_ADMIN_GATE=true: the admin gate `/metrics` passes (an admin of the operator tenant). */
  metricsGate?: SecurityGate;
  /** The scrape secret `/metrics` wants, and whether it shows subscription ids. */
  metricsAccess: MetricsAccess;
  requests: RequestLog;
}

export interface RunningOpsServer {
  url: string;
  close(): Promise<void>;
}

/**
 * What a worker-only process (no gateway) serves on EVENTMESH_HTTP_HOST:EVENTMESH_HTTP_PORT, so it is probed and
 * scraped like any other: `GET /health/live`, `/health/ready`, `/health` (the same HealthService, with the
 * worker's dispatch loops) and `GET /metrics` (its own registry: dispatch, delivery, ownership, the Temporal
 * core's series), public or behind the admin gate as EVENTMESH_METRICS_ADMIN_GATE says. Nothing else: every other
 * request is 404 `NOT_FOUND` with the usual `{ code, message }` body. Answers carry `x-request-id` and get access
 * lines like the gateway's (request-log.ts).
 */
export async function startOpsServer(options: OpsServerOptions): Promise<RunningOpsServer> {
  const server = createServer((request, response) => {
    options.requests.begin(request, response);
    serve(options, request, response).catch((e: unknown) => answerError(response, e));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  return { url: `http://${host}:${port}`, close: () => closeServer(server) };
}

async function serve(options: OpsServerOptions, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = request.url ?? '/';
  const queryAt = url.indexOf('?');
  const path = queryAt === -1 ? url : url.slice(0, queryAt);
  if (request.method !== 'GET' && request.method !== 'HEAD') throw notFound(request.method ?? '', path);
  switch (path) {
    case '/health/live':
      return answerJson(response, 200, options.health.live(), NO_STORE);
    case '/health/ready': {
      const report = await options.health.ready();
      return answerJson(response, report.status === 'up' ? 200 : 503, report, NO_STORE);
    }
    case '/health': {
      const report = await options.health.check();
      return answerJson(response, report.status === 'up' ? 200 : 503, report, NO_STORE);
    }
    case '/metrics': {
      if (!options.metrics) throw notFound('GET', path);
      if (options.metricsGate) {
        const admission = await options.metricsGate.admit({
          route: 'GET /metrics',
          action: 'admin',
          operatorOnly: true,
          privileged: true,
          headers: gateHeadersOf(request),
          remoteAddress: request.socket.remoteAddress ?? '',
          requestId: response.getHeader(REQUEST_ID_HEADER) as string | undefined,
        });
        admission.release();
      }
      options.metricsAccess.check(request.headers);
      const text = await options.metrics.scrape({ subscriptionLabels: options.metricsAccess.subscriptionLabels });
      response.writeHead(200, { 'content-type': options.metrics.contentType, 'cache-control': 'no-store' });
      response.end(text);
      return;
    }
    default:
      throw notFound(request.method ?? 'GET', path);
  }
}

const NO_STORE = { 'cache-control': 'no-store' };

const notFound = (method: string, path: string) =>
  new EventMeshError(
    ErrorCode.NotFound,
    `${method} ${path} is not served by a worker-only process (GET /health/live, /health/ready, /health, /metrics)`,
  );

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
