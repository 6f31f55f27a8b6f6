import { createServer, type Server, type ServerOptions } from 'node:http';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyServerFactoryHandler } from 'fastify';
import { A2ABroker, LocalA2AWorker, PushDeadLetters } from '@libs/a2a';
import type { EventMeshConfig } from '@libs/config';
import { DeadLetterReplays, DeadLetterService } from '@libs/dead-letters';
import { HealthService, skippedEventsFinding } from '@libs/health';
import { EventIngress } from '@libs/ingress';
import { TopicNamespace } from '@libs/topics';
import { RequestReplyService } from '@libs/request-reply';
import { type RunningLoops, WebhookSender } from '@libs/delivery';
import type { RuntimeMetrics } from '@libs/metrics';
import { createAccessLog, createLogger, NestPinoLogger } from '@libs/logging';
import { OwnershipAdmin } from '@libs/ownership';
import {
  AclRuleStore,
  ApiKeyStore,
  LeaseStore,
  SessionAgentStore,
  SessionUsageStore,
  SessionHomeStore,
  SkippedRangeStore,
  StreamPresenceStore,
  TenantQuotaStore,
} from '@libs/storage';
import { shutdownInOrder, type Dependencies } from '@libs/runtime';
import {
  AclAdmin,
  ApiKeyService,
  describeGates,
  PublisherSecretStore,
  SecretBox,
  SecurityGate,
  SinkGuard,
  TenantQuotaAdmin,
} from '@libs/security';
import type { HealthFinding } from '@libs/health';
import { SessionServer } from '@libs/sessions';
import {
  ClusterCredential,
  derivedAddress,
  PeerChannels,
  PollConsumers,
  StreamClients,
  StreamHub,
  StreamPresence,
} from '@libs/streams';
import {
  SubscriptionDeliveryState,
  SubscriptionOffsets,
  SubscriptionPlacement,
  SubscriptionService,
} from '@libs/subscriptions';
import { registerBodyParsers } from './http/body-parsers';
import { answerClientError } from './http/client-errors';
import { ConnectionCap } from './http/connection-cap';
import { Gates } from './http/gate-route';
import { GatewayModule } from './gateway.module';
import { registerMethodNotAllowed } from './http/method-not-allowed';
import { nestRoutesOf } from './http/nest-routes';
import { replyError } from './http/http-error';
import { MetricsAccess } from './operations/metrics-access';
import { publishDoc, PUBLISH_GATE, PUBLISH_PATH, PublishRoute } from './publish/publish-route';
import { frameAdaptors } from './publish/frame-adaptors';
import { RequestLog } from './http/request-log';
import { RouteTable } from './http/route-table';
import { registerAuthenticateFirst } from './http/authenticate-first';
import { registerClusterChannel } from './streams/cluster-channel-route';
import { registerSessions } from './streams/sessions-routes';
import { registerWebSocketStreams } from './streams/websocket-streams';

/** The gateway role of an instance: its HTTP server (Nest on Fastify, with the publish route ahead of it). */
export interface RunningGateway {
  app: NestFastifyApplication;
  /** The gateway's base URL. */
  url: string;
  requestReply: RequestReplyService;
  close(): Promise<void>;
}

export interface GatewayOptions {
  /** The request gates: ingress routes and the admin API (libs/security, buildGates). */
  gates: { ingress: SecurityGate; admin: SecurityGate };
  /** Stream clients connect here and are fed by the instance's worker (the same hub). */
  streams: StreamHub;
  /** This process's holder id and the cluster credential of the internal stream channel (libs/streams/cluster-channel.ts). */
  cluster: { holder: string; credential: ClusterCredential };
  /** What the worker of the same process adds to /health's stats (ownership, orphan takeover), if it runs. */
  workerStats?: () => Record<string, unknown>;
  /** The instance's metrics (absent: EVENTMESH_METRICS_ENABLED=false; GET /metrics answers 404). */
  metrics?: RuntimeMetrics;
  /** The instance's running dispatch loops, for /health/ready. */
  running?: RunningLoops;
  /**
   * The A2A worker of the same process (WorkerHost.a2a): task workflows are started through its client, on its own
   * connection, with eager start, and a blocking send hears at once of a task it settled. Absent (a gateway-only
   * process), task workflows are started through the gateway's client.
   */
  a2aWorker?: LocalA2AWorker;
}

const log = createLogger('Gateway');

/** How long the HTTP server's close waits for the answers under way before it closes their connections. */
const HTTP_CLOSE_GRACE_MS = 5000;

/**
 * Closes the Nest application (its modules, then the HTTP server, which waits for the answers under way). An answer
 * still not done after HTTP_CLOSE_GRACE_MS (a client that does not read its response, a stream that did not end)
 * has its connection closed, so a shutdown never waits on a client.
 */
async function closeHttp(app: NestFastifyApplication | undefined): Promise<void> {
  if (!app) return;
  const server = app.getHttpServer() as Server;
  const timer = setTimeout(() => {
    log.warn({ graceMs: HTTP_CLOSE_GRACE_MS }, 'answers still under way at shutdown; closing their connections');
    server.closeAllConnections();
  }, HTTP_CLOSE_GRACE_MS);
  try {
    await app.close();
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Starts the gateway role on dependencies the instance connected: subscriptions, publish, request-reply,
 * streams, admin and health routes, listening on EVENTMESH_HTTP_HOST:PORT. On a failure it closes what it
 * started and throws.
 */
export async function startGateway(
  config: EventMeshConfig,
  deps: Dependencies,
  options: GatewayOptions,
): Promise<RunningGateway> {
  const { streams } = options;
  let publish: PublishRoute | undefined;
  let polling: PollConsumers | undefined;
  let requestReplyStarted: RequestReplyService | undefined;
  let started: NestFastifyApplication | undefined;
  let presence: StreamPresence | undefined;
  let a2aStarted: A2ABroker | undefined;
  let sessions: SessionServer | undefined;
  /** The webhook sender of operators' push redeliveries (the worker's pushes have the worker's). */
  let pushWebhooks: WebhookSender | undefined;
  // The channels an operator's disconnect of a client held by another gateway process goes over.
  const peers = new PeerChannels(options.cluster.credential, options.cluster.holder);
  const close = () =>
    shutdownInOrder('gateway', [
      ['stream presence', () => presence?.close()],
      // Before the HTTP server: its clients' sessions end now (1001), and the other instances stop opening here.
      ['streaming sessions', () => sessions?.close()],
      ['A2A broker', () => a2aStarted?.close()],
      ['peer channels', () => peers.close()],
      ['publish route', () => publish?.close()],
      // Before the HTTP server: the polls waiting are answered now rather than at the end of their waitMs.
      ['long-poll consumers', () => polling?.close()],
      ['HTTP server', () => closeHttp(started)],
      ['push redelivery sender', () => pushWebhooks?.close()],
      ['request-reply', () => requestReplyStarted?.close()],
    ]);
  try {
    // Told the port once the server listens: a sink at this gateway's own publish route is refused.
    const sinks = SinkGuard.fromConfig(config);
    const subscriptions = SubscriptionService.forInstance(deps.db, deps.topics, config, sinks);
    const placement = SubscriptionPlacement.forInstance(deps.db, config);
    const skippedRanges = new SkippedRangeStore(deps.db);
    const namespace = TopicNamespace.fromConfig(deps.db, deps.topics, config);
    const ingress = new EventIngress(
      namespace,
      deps.producer,
      config.kafka.topics[0],
      config.kafka.produceMaxBatchEvents,
      deps.tracing,
    );
    const requestReply = new RequestReplyService(deps.db, ingress, config.postgres, config.instance.id, {
      maxPending: config.http.maxPendingRequests,
      maxPendingPerTenant: config.http.maxPendingRequestsPerTenant,
      retryAfterSeconds: config.http.retryAfterSeconds,
    });
    await requestReply.start();
    requestReplyStarted = requestReply;
    const gates = new Gates(
      options.gates.ingress,
      options.gates.admin,
      (id, tenant) => subscriptions.topicFor(id, tenant),
      ingress.defaultTopic,
    );
    const metrics = options.metrics;
    sessions = new SessionServer({
      config: config.sessions,
      store: new SessionAgentStore(deps.db),
      homes: new SessionHomeStore(deps.db),
      usage: new SessionUsageStore(deps.db),
      gate: options.gates.ingress,
      cluster: options.cluster,
      operatorTenant: config.admin.security.operatorTenant,
      metrics,
    });
    const sessionServer = sessions;
    if (metrics) {
      metrics.sources.sessions = () => sessionServer.stats();
      metrics.sources.gates = () => ({ ingress: gates.ingress.stats(), admin: gates.admin.stats() });
      metrics.sources.requestReply = () => requestReply.stats;
    }
    const adaptors = frameAdaptors();
    const route = new PublishRoute({
      ingress,
      adaptors,
      gate: gates.ingress,
      defaultTopic: ingress.defaultTopic,
      bodyLimitBytes: config.http.bodyLimitBytes,
      metrics,
    });
    publish = route;
    const connections = new ConnectionCap(config.http.maxConnections, config.http.retryAfterSeconds);
    const requests = new RequestLog(createAccessLog(config.log.access));
    const polls = new PollConsumers(streams, config.streams.pollMaxConsumers);
    polling = polls;
    const a2a = A2ABroker.create(
      deps.db,
      SinkGuard.fromConfig(config),
      config.agents,
      {
        publish: (topic, frame) => deps.producer.publish(topic, frame),
        publishAll: (topic, frames) => deps.producer.publishAll(topic, frames),
        ensureTopic: (topic) => deps.topics.ensureTopic(topic),
        emptyTopic: (topic) => deps.topics.emptyTopic(topic),
      },
      { client: deps.temporal.client, worker: options.a2aWorker },
      SecretBox.fromConfig(config),
    );
    a2aStarted = a2a;
    const routes = new RouteTable();
    routes.addAheadOfRouter('POST', PUBLISH_PATH, publishDoc(config.kafka.produceMaxBatchEvents), PUBLISH_GATE);
    const gateway = GatewayModule.register({
      topics: namespace,
      requestReply,
      streams,
      polls,
      subscriptions,
      metrics: metrics && {
        metrics,
        adminGate: config.metrics.adminGate,
        access: MetricsAccess.fromConfig(config, !(options.gates.ingress.open && options.gates.admin.open)),
      },
      health: new HealthService(deps, config, {
        loops: options.running,
        stats: () => ({
          requestReply: {
            ...requestReply.stats,
            listening: requestReply.listening,
            maxPending: config.http.maxPendingRequests,
            maxPendingPerTenant: config.http.maxPendingRequestsPerTenant,
          },
          // What this process holds for Kafka and what it shed (docs/operations.md#backpressure).
          producer: deps.producer.depth(),
          http: {
            openConnections: connections.openConnections,
            maxConnections: config.http.maxConnections,
            refused: connections.refused,
          },
          pollConsumers: polls.size,
          sessions: sessionServer.stats(),
          a2aStreams: a2a.streams.stats(),
          a2aWorkflowStarts: a2a.workflowStarts(),
          a2aRequestHandoff: a2a.requestHandoff(),
          a2aFirstAttempts: a2a.firstAttempts(),
          security: { ingress: gates.ingress.stats(), admin: gates.admin.stats() },
          ...options.workerStats?.(),
        }),
        findings: [
          { unknownCode: 'ORPHANS_UNKNOWN', read: () => placement.health() },
          // /health is public: subscription ids (tenants' data) are listed only while both gates are open.
          skippedEventsFinding(
            skippedRanges,
            config.delivery.skipWarningMs,
            options.gates.ingress.open && options.gates.admin.open,
          ),
          gateFinding(options.gates, config.http.host),
          auditFinding(options.gates),
        ],
        gate: () => ({ ingress: gates.ingress.stats().mode, admin: gates.admin.stats().mode }),
      }),
      placement,
      subscriptionOffsets: SubscriptionOffsets.forInstance(deps.db, deps.topics, config),
      deliveryState: new SubscriptionDeliveryState(deps.db),
      streamClients: new StreamClients(streams, new StreamPresenceStore(deps.db), peers, {
        holder: options.cluster.holder,
        instanceId: config.instance.id,
      }),
      skippedRanges,
      gates,
      apiKeys: new ApiKeyService(new ApiKeyStore(deps.db), config.admin.security.operatorTenant),
      publisherSecrets: new PublisherSecretStore(deps.db, SecretBox.fromConfig(config)),
      a2a,
      pushDeadLetters: PushDeadLetters.forInstance(deps.db, config, (pushWebhooks = WebhookSender.forInstance(config))),
      deadLetters: new DeadLetterService(deps.db, (id, tenant) => subscriptions.get(id, tenant)),
      sessions: sessionServer,
      replays: new DeadLetterReplays(deps.db, deps.temporal.client, (id, tenant) => subscriptions.get(id, tenant), {
        defaultRatePerSecond: config.delivery.deadLetterReplayRate,
        heartbeatTimeoutMs: config.delivery.leaseTtlMs,
      }),
      acl: new AclAdmin(new AclRuleStore(deps.db)),
      quotas: new TenantQuotaAdmin(
        new TenantQuotaStore(deps.db),
        config.security.gate.quota,
        config.admin.security.operatorTenant,
      ),
      ownership:
        config.delivery.topology === 'PARTITION_OWNED_PULL'
          ? new OwnershipAdmin(
              deps.temporal.client,
              new LeaseStore(deps.db, Math.floor(config.delivery.leaseTtlMs / 2)),
            )
          : undefined,
      routes,
      adaptors,
      limits: { maxBodyBytes: config.http.bodyLimitBytes, maxBatchEvents: config.kafka.produceMaxBatchEvents },
    });
    // Nest's routes' gates, for the API document's `security` (a Fastify route's config carries no `@GateRoute`).
    routes.declareGates(nestRoutesOf(GatewayModule.controllersOf(gateway)));
    const app = await NestFactory.create<NestFastifyApplication>(
      gateway,
      new FastifyAdapter({
        bodyLimit: config.http.bodyLimitBytes,
        clientErrorHandler: answerClientError,
        // POST /events/publish is answered on the HTTP server itself (publish-route.ts); the rest goes to Fastify.
        serverFactory: (fastify: FastifyServerFactoryHandler) => {
          const server = createServer(slowClientTimeouts(config.http), (request, response) => {
            requests.begin(request, response);
            return (
              connections.refuse(request, response) || route.handle(request, response) || fastify(request, response)
            );
          });
          connections.attach(server);
          return server;
        },
      }),
      { logger: new NestPinoLogger(), abortOnError: false, bodyParser: false },
    );
    started = app;
    // Before any route is registered: the API document lists what the app registers (route-table.ts).
    routes.attach(app.getHttpAdapter().getInstance());
    registerBodyParsers(app, adaptors);
    // A WebSocket upgrade does not pass the server's request handler: the connection cap is asked here.
    app
      .getHttpAdapter()
      .getInstance()
      .addHook('onRequest', async (request, reply) => {
        if (!connections.isOver(request.raw)) return;
        await replyError(reply, connections.error(), { connection: 'close' });
        // An upgrade's socket is not the server's to close after the answer: close it here (after the write).
        request.raw.socket.end();
      });
    registerMethodNotAllowed(app.getHttpAdapter().getInstance(), routes);
    registerAuthenticateFirst(app.getHttpAdapter().getInstance(), routes, gates);
    await registerWebSocketStreams(app, {
      hub: streams,
      subscriptions,
      gates,
      maxPayload: sessionServer.maxFrameBytes,
    });
    registerClusterChannel(app, { hub: streams, ...options.cluster });
    registerSessions(app, { server: sessionServer, gates, ...options.cluster });
    await app.listen(config.http.port, config.http.host);
    const address = app.getHttpServer().address();
    const port = typeof address === 'object' && address ? address.port : config.http.port;
    sinks.listeningOn(port);
    const host = config.http.host === '0.0.0.0' ? '127.0.0.1' : config.http.host;
    const advertised = config.instance.advertisedUrl || derivedAddress(config.http.host, port);
    presence = new StreamPresence(new StreamPresenceStore(deps.db), streams, {
      holder: options.cluster.holder,
      instanceId: config.instance.id,
      address: advertised,
    });
    presence.start();
    sessionServer.start({ instanceId: config.instance.id, address: advertised });
    return { app, url: `http://${host}:${port}`, requestReply, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * The HTTP server's limits on a slow client (EVENTMESH_HTTP_*_TIMEOUT_MS): its headers, its whole request, its idle
 * keep-alive connection. Node ends the headers and request timers once the request is read, so an answer held on
 * purpose (long-poll, request-reply, streams) is never cut, and no socket inactivity timeout is set for the same
 * reason. Node checks the timers every `connectionsCheckingInterval` (30 s by default): every second here, or a
 * quarter of a shorter headers timeout, so a slow client is cut within that much past its timeout.
 */
export function slowClientTimeouts(http: EventMeshConfig['http']): ServerOptions {
  return {
    headersTimeout: http.headersTimeoutMs,
    requestTimeout: http.requestTimeoutMs,
    keepAliveTimeout: http.keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, Math.floor(http.headersTimeoutMs / 4)),
  };
}

/**
 * `AUDIT_DEGRADED` while the audit sink's last write failed: gate decisions are being lost (the requests are
 * served). The status stays `up`: a load balancer must not take the instance out for it.
 */
function auditFinding(gates: GatewayOptions['gates']): HealthFinding {
  return {
    unknownCode: 'AUDIT_UNKNOWN',
    read: () => {
      const audit = gates.ingress.stats().audit ?? gates.admin.stats().audit;
      if (audit?.status !== 'degraded') return Promise.resolve({ warnings: [] });
      const { sink, failed, dropped, lastFailure } = audit;
      const message = `audit records are not being written (${sink} sink): ${lastFailure?.reason ?? 'unknown'}`;
      return Promise.resolve({
        warnings: [{ code: 'AUDIT_DEGRADED', message, sink, failed, dropped, lastFailureAt: lastFailure?.at }],
      });
    },
  };
}

/** `GATE_OPEN` while a gate is open on a non-loopback listen address. */
function gateFinding(gates: GatewayOptions['gates'], host: string): HealthFinding {
  return {
    unknownCode: 'GATE_UNKNOWN',
    read: () =>
      Promise.resolve({
        warnings: describeGates(gates, host).warnings.map((message) => ({ code: 'GATE_OPEN', message })),
      }),
  };
}
