import { createServer } from 'node:http';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyServerFactoryHandler, FastifyServerOptions } from 'fastify';
import type { EventMeshConfig, InstanceRole } from '../../../libs/config';
import { HealthService } from '../../../libs/health';
import { EventIngress } from '../../../libs/ingress';
import { RequestReplyService } from '../../../libs/request-reply';
import { createLogger, NestPinoLogger } from '../../../libs/logging';
import { OwnershipAdmin } from '../../../libs/ownership';
import { LeaseStore, SkippedRangeStore } from '../../../libs/storage';
import { closeDependencies, connectDependencies, Dependencies } from '../../../libs/runtime';
import { AdmitAllPolicy, GatePolicy } from '../../../libs/security';
import { PollConsumers, StreamHub } from '../../../libs/streams';
import { SubscriptionPlacement, SubscriptionService } from '../../../libs/subscriptions';
import { dispatchWorkflowIdOf } from '../../../libs/temporal';
import { instanceWorkflowIdOf } from '../../../workflows';
import { WorkerHost } from '../../worker/src/worker-host';
import { registerBodyParsers } from './body-parsers';
import { ConnectionCap } from './connection-cap';
import { GatewayModule } from './gateway.module';
import { toHttpError } from './http-error';
import { PublishRoute } from './publish-route';
import { registerWebSocketStreams } from './websocket-streams';

export interface RunningInstance {
  config: EventMeshConfig;
  deps: Dependencies;
  app?: NestFastifyApplication;
  worker?: WorkerHost;
  /** The gateway's base URL, when this process runs the gateway. */
  url?: string;
  requestReply?: RequestReplyService;
  close(): Promise<void>;
}

/**
 * Starts one runtime instance: connects Postgres, Kafka and Temporal (each failure is one clear line), then the
 * gateway and/or the Temporal worker, as `roles` says.
 */
export interface InstanceOptions {
  roles?: InstanceRole[];
  /** The request gate's policy; admits everything when absent. */
  gate?: GatePolicy;
  /** Hears of a failure after boot that leaves the instance unable to work (the worker stopping by itself). */
  onFatal?: (reason: string) => void;
}

export async function startInstance(config: EventMeshConfig, options: InstanceOptions = {}): Promise<RunningInstance> {
  const roles = options.roles ?? config.instance.roles;
  const log = createLogger('Instance');
  const deps = await connectDependencies(config, roles.join('+'));
  let publish: PublishRoute | undefined;
  let polling: PollConsumers | undefined;
  const instance: RunningInstance = {
    config,
    deps,
    async close() {
      publish?.close();
      await instance.app?.close().catch(() => undefined);
      polling?.close();
      await instance.requestReply?.close();
      await instance.worker?.stop();
      await closeDependencies(deps);
    },
  };
  try {
    // Stream clients connect to the gateway and are fed by the worker of the same process.
    const streams = new StreamHub(0);
    if (roles.includes('worker')) {
      instance.worker = await WorkerHost.start(config, deps, options.onFatal ?? ((reason) => log.error({ reason }, 'instance failed')), streams);
    }
    if (roles.includes('gateway')) {
      const subscriptions = SubscriptionService.forInstance(deps.db, deps.topics, config);
      const placement = SubscriptionPlacement.forInstance(deps.db, config);
      const gate = options.gate ?? new AdmitAllPolicy();
      const ingress = new EventIngress(deps.topics, deps.producer, config.kafka.topics[0], config.kafka.produceMaxBatchEvents);
      const requestReply = new RequestReplyService(deps.db, ingress, config.postgres, config.instance.id, {
        maxPending: config.http.maxPendingRequests,
        retryAfterSeconds: config.http.retryAfterSeconds,
      });
      await requestReply.start();
      instance.requestReply = requestReply;
      const route = new PublishRoute({ ingress, gate, bodyLimitBytes: config.http.bodyLimitBytes });
      publish = route;
      const connections = new ConnectionCap(config.http.maxConnections, config.http.retryAfterSeconds);
      const polls = new PollConsumers(streams, config.streams.pollMaxConsumers);
      polling = polls;
      const app = await NestFactory.create<NestFastifyApplication>(
        GatewayModule.register({
          requestReply,
          streams,
          polls,
          subscriptions,
          health: new HealthService(deps, config, () => ({
            requestReply: { ...requestReply.stats, listening: requestReply.listening, maxPending: config.http.maxPendingRequests },
            // What this process holds for Kafka and what it shed (docs/operations.md#backpressure).
            producer: deps.producer.depth(),
            http: { openConnections: connections.openConnections, maxConnections: config.http.maxConnections, refused: connections.refused },
            pollConsumers: polls.size,
            ...(instance.worker?.agent ? { ownership: instance.worker.agent.status() } : {}),
            ...(instance.worker?.orphans ? { orphanTakeover: instance.worker.orphans.status() } : {}),
          }), () => placement.health()),
          placement,
          skippedRanges: new SkippedRangeStore(deps.db),
          gate,
          ownership:
            config.delivery.topology === 'PARTITION_OWNED_PULL' ? new OwnershipAdmin(deps.temporal.client, new LeaseStore(deps.db)) : undefined,
        }),
        new FastifyAdapter({
          bodyLimit: config.http.bodyLimitBytes,
          // POST /events/publish is answered on the HTTP server itself (publish-route.ts); the rest goes to Fastify.
          serverFactory: (fastify: FastifyServerFactoryHandler, options: FastifyServerOptions) => {
            const server = createServer(
              (request, response) => connections.refuse(request, response) || route.handle(request, response) || fastify(request, response),
            );
            connections.attach(server);
            // What Fastify sets on a server it creates itself, and leaves to a server factory.
            server.keepAliveTimeout = options.keepAliveTimeout ?? 72_000;
            server.requestTimeout = options.requestTimeout ?? 0;
            server.setTimeout(options.connectionTimeout ?? 0);
            return server;
          },
        }),
        { logger: new NestPinoLogger(), abortOnError: false, bodyParser: false },
      );
      registerBodyParsers(app);
      // A WebSocket upgrade does not pass the server's request handler: the connection cap is asked here.
      app
        .getHttpAdapter()
        .getInstance()
        .addHook('onRequest', async (request, reply) => {
          if (!connections.isOver(request.raw)) return;
          const { status, body, headers } = toHttpError(connections.error());
          await reply.code(status).headers({ ...headers, connection: 'close' }).send(body);
          // An upgrade's socket is not the server's to close after the answer: close it here (after the write).
          request.raw.socket.end();
        });
      await registerWebSocketStreams(app, { hub: streams, subscriptions, gate });
      await app.listen(config.http.port, config.http.host);
      instance.app = app;
      const address = app.getHttpServer().address();
      const port = typeof address === 'object' && address ? address.port : config.http.port;
      const host = config.http.host === '0.0.0.0' ? '127.0.0.1' : config.http.host;
      instance.url = `http://${host}:${port}`;
    }
  } catch (e) {
    await instance.close();
    throw e;
  }
  log.info(
    {
      roles,
      topology: config.delivery.topology,
      api: instance.url,
      health: instance.url && `${instance.url}/health`,
      temporalUi: `${config.temporal.uiUrl}/namespaces/${config.temporal.namespace}/workflows`,
      dispatchWorkflow:
        instance.worker && config.delivery.topology === 'LOCAL_STICKY_PULL' ? dispatchWorkflowIdOf(config.instance.id) : undefined,
      leaseWorkflow: instance.worker?.agent ? instanceWorkflowIdOf(config.instance.id) : undefined,
    },
    'eventmesh instance ready',
  );
  return instance;
}
