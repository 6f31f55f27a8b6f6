import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { EventMeshConfig, InstanceRole } from '@libs/config';
import { createLogger } from '@libs/logging';
import {
  closeDependencies,
  connectDependencies,
  Dependencies,
  producerOptionsOf,
  shutdownInOrder,
} from '@libs/runtime';
import { EventProducer } from '@libs/kafka';
import { BuiltGates, buildGates, describeGates, SecretBox, sealStoredSecrets } from '@libs/security';
import type { RequestReplyService } from '@libs/request-reply';
import { poolLeakDetectorOf, StoredCountsReader, StreamPresenceStore } from '@libs/storage';
import { RunningLoops } from '@libs/delivery';
import { RuntimeMetrics } from '@libs/metrics';
import {
  ClusterCredential,
  ClusterStreamRouter,
  holderIdOf,
  PeerChannels,
  PresenceReader,
  StreamHub,
} from '@libs/streams';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { instanceWorkflowIdOf } from '../../../contracts';
import { HealthService } from '@libs/health';
import { createAccessLog } from '@libs/logging';
import { RunningGateway, startGateway } from '../../gateway/src/gateway-server';
import { RequestLog } from '../../gateway/src/http/request-log';
import { WorkerHost } from '../../worker/src/worker-host';
import { MetricsAccess } from '../../gateway/src/operations/metrics-access';
import { RunningOpsServer, startOpsServer } from './ops-server';

export interface RunningInstance {
  config: EventMeshConfig;
  deps: Dependencies;
  app?: NestFastifyApplication;
  worker?: WorkerHost;
  /** The gateway's base URL, when this process runs the gateway. */
  url?: string;
  /** A worker-only process's probes and metrics (ops-server.ts): its base URL. */
  opsUrl?: string;
  requestReply?: RequestReplyService;
  /** The instance's metrics registry (absent when EVENTMESH_METRICS_ENABLED=false). */
  metrics?: RuntimeMetrics;
  close(): Promise<void>;
}

export interface InstanceOptions {
  roles?: InstanceRole[];
  /** The request gates; built from the configuration when absent (tests hand in their own). */
  gates?: BuiltGates;
  /** Hears of a failure after boot that leaves the instance unable to work (the worker stopping by itself). */
  onFatal?: (reason: string) => void;
}

/**
 * Starts one runtime instance: connects Postgres, Kafka and Temporal (each failure is one clear line), then its
 * roles, as `roles` says: the worker (apps/worker: the Temporal workers and the dispatch loops) and the gateway
 * (apps/gateway: the HTTP API). In one process they share the stream hub: stream clients connect to the gateway
 * and are fed by the worker. Before either, stored secrets are brought to the active key (secret-sealer.ts).
 */
export async function startInstance(config: EventMeshConfig, options: InstanceOptions = {}): Promise<RunningInstance> {
  const roles = options.roles ?? config.instance.roles;
  const log = createLogger('Instance');
  // Secrets at rest need a key: without one the instance does not start (a ConfigError, exit 78).
  const secrets = SecretBox.fromConfig(config);
  // One registry per instance (libs/metrics): made before the producer, which reports its requests to it.
  const metrics = config.metrics.enabled ? new RuntimeMetrics() : undefined;
  const running = new RunningLoops();
  const deps = await connectDependencies(config, roles.join('+'), metrics);
  if (metrics) {
    metrics.sources.producer = () => deps.producer.depth();
    metrics.sources.loops = running;
    // Both pools' leaks, the main one's and the dispatch loops' (leak detection is on for both or neither).
    metrics.sources.postgresPool = () => {
      const [main, dispatch] = [deps.db, deps.dispatchDb].map((db) => poolLeakDetectorOf(db)?.stats());
      return (
        main && dispatch && { checkedOut: main.checkedOut + dispatch.checkedOut, leaks: main.leaks + dispatch.leaks }
      );
    };
    const stored = new StoredCountsReader(deps.db);
    metrics.readStoredCounts(() => stored.read());
  }
  let gateway: RunningGateway | undefined;
  let ops: RunningOpsServer | undefined;
  let gates: BuiltGates | undefined;
  // Stream clients may connect to any instance: the dispatching one reaches them over the internal channel,
  // authenticated by a key every instance derives from the secrets keys (libs/streams/cluster-channel.ts).
  const holder = holderIdOf(config.instance.id);
  const credential = ClusterCredential.fromConfig(config);
  const peers = new PeerChannels(credential, holder);
  const instance: RunningInstance = {
    config,
    deps,
    metrics,
    async close() {
      await shutdownInOrder('instance', [
        ['gateway', () => gateway?.close()],
        ['ops server', () => ops?.close()],
        ['gates', () => gates?.close()],
        ['worker', () => instance.worker?.stop()],
        ['peer channels', () => peers.close()],
        ['dependencies', () => closeDependencies(deps)],
      ]);
    },
  };
  try {
    await sealStoredSecrets(deps.db, secrets);
    const streams = new StreamHub(0);
    if (roles.includes('worker')) {
      const router = new ClusterStreamRouter(
        streams,
        new PresenceReader(new StreamPresenceStore(deps.db)),
        peers,
        holder,
      );
      instance.worker = await WorkerHost.start(
        config,
        deps,
        options.onFatal ?? ((reason) => log.error({ reason }, 'instance failed')),
        router,
        { metrics, running },
      );
    }
    if (roles.includes('gateway')) {
      gates = options.gates ?? (await gatesOf(config, deps));
      const described = describeGates(gates, config.http.host);
      for (const warning of described.warnings) log.warn({ host: config.http.host }, warning);
      gateway = await startGateway(config, deps, {
        gates,
        streams,
        cluster: { holder, credential },
        metrics,
        running,
        workerStats: () => workerStatsOf(instance),
        a2aWorker: instance.worker?.a2a,
      });
      instance.app = gateway.app;
      instance.url = gateway.url;
      instance.requestReply = gateway.requestReply;
    } else {
      // No gateway in this process: it still answers probes and scrapes (ops-server.ts).
      if (metrics && config.metrics.adminGate) gates = options.gates ?? (await gatesOf(config, deps));
      ops = await startOpsServer({
        host: config.http.host,
        port: config.http.port,
        health: new HealthService(deps, config, { loops: running, stats: () => workerStatsOf(instance) }),
        metrics,
        metricsGate: gates?.admin,
        metricsAccess: MetricsAccess.fromConfig(config, gatesOn(gates ?? options.gates, config)),
        requests: new RequestLog(createAccessLog(config.log.access)),
      });
      instance.opsUrl = ops.url;
    }
  } catch (e) {
    await instance.close();
    throw e;
  }
  log.info(
    {
      roles,
      topology: config.delivery.topology,
      ...(gates ? { gate: gates.ingress.stats().mode, adminGate: gates.admin.stats().mode } : {}),
      api: instance.url,
      health: `${instance.url ?? instance.opsUrl}/health`,
      metrics: metrics ? `${instance.url ?? instance.opsUrl}/metrics` : undefined,
      temporalUi: `${config.temporal.uiUrl}/namespaces/${config.temporal.namespace}/workflows`,
      dispatchWorkflow:
        instance.worker && config.delivery.topology === 'LOCAL_STICKY_PULL'
          ? dispatchWorkflowIdOf(config.instance.id)
          : undefined,
      leaseWorkflow: instance.worker?.agent ? instanceWorkflowIdOf(config.instance.id) : undefined,
    },
    'eventmesh instance ready',
  );
  return instance;
}

/** What the worker adds to /health's stats (ownership, orphan takeover, the A2A streams it hands over), if this process runs it. */
function workerStatsOf(instance: RunningInstance): Record<string, unknown> {
  return {
    ...(instance.worker?.agent ? { ownership: instance.worker.agent.status() } : {}),
    ...(instance.worker?.orphans ? { orphanTakeover: instance.worker.orphans.status() } : {}),
    ...(instance.worker?.a2a.parkedStreams ? { a2aParkedStreams: instance.worker.a2a.parkedStreams.stats() } : {}),
  };
}

/** Whether either gate is on: the gates' own word, or (no gate built in a worker-only process) the configuration's. */
function gatesOn(gates: BuiltGates | undefined, config: EventMeshConfig): boolean {
  if (gates) return !(gates.ingress.open && gates.admin.open);
  return config.security.gate.filters.length > 0 || config.admin.security.filters.length > 0;
}

/**
 * The instance's gates. A CloudEvents audit sink writes through a producer of its own, never the publishes': Kafka
 * fails a produce request whole when one of its topics cannot be written, so audit records batched with publishes
 * would fail every publish while the audit topic is unavailable (and the client's metadata of a topic gone fails
 * its other sends too).
 */
async function gatesOf(config: EventMeshConfig, deps: Dependencies): Promise<BuiltGates> {
  const own = { db: deps.db, instanceId: config.instance.id };
  if (config.security.gate.audit.sink !== 'CLOUDEVENTS') return buildGates(config, { ...own, producer: deps.producer });
  const producer = new EventProducer(deps.kafka, deps.topics, producerOptionsOf(config));
  await producer.connect();
  const gates = buildGates(config, { ...own, producer });
  return {
    ingress: gates.ingress,
    admin: gates.admin,
    async close() {
      await gates.close();
      await producer.disconnect();
    },
  };
}
