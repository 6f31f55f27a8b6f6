import type { Kafka } from 'kafkajs';
import type { DataSource } from 'typeorm';
import type { EventMeshConfig } from '@libs/config';
import { createKafka, EventProducer, ProducerOptions, TopicAdmin } from '@libs/kafka';
import { createLogger } from '@libs/logging';
import { createDataSource, createDispatchDataSource } from '@libs/storage';
import { connectTemporal, TemporalHandle } from '@libs/temporal';
import { startTracing, Tracing } from '@libs/tracing';
import { BootError, reasonOf } from './boot-error';
import { withDeadline } from './deadline';
import { shutdownInOrder } from './shutdown';

/** The connected outside world of one instance. */
export interface Dependencies {
  db: DataSource;
  /** The dispatch loops' own pool (createDispatchDataSource): nothing but delivery uses it. */
  dispatchDb: DataSource;
  kafka: Kafka;
  topics: TopicAdmin;
  producer: EventProducer;
  temporal: TemporalHandle;
  /** This process's tracing (libs/tracing): off by default; with it on, the Temporal client is traced too. */
  tracing: Tracing;
}

/**
 * Connects Postgres, Kafka and Temporal in that order. `metrics` hears of the producer's requests (libs/metrics). Each failure becomes a {@link BootError} that names the
 * server, its address, the settings that point at it, and the reason, in one line.
 */
export async function connectDependencies(
  config: EventMeshConfig,
  role: string,
  metrics?: ProducerOptions['metrics'],
): Promise<Dependencies> {
  const log = createLogger('Dependencies');
  const opened: { close(): Promise<unknown> }[] = [];
  const tracing = await startTracing(config);
  opened.push({ close: () => tracing.shutdown() });
  try {
    const pg = config.postgres;
    const db = createDataSource(pg, `eventmesh-${config.instance.id}-${role}`);
    const dispatchDb = createDispatchDataSource(pg, `eventmesh-${config.instance.id}-${role}-dispatch`);
    try {
      await withDeadline(10000, db.initialize());
      opened.push({ close: () => db.destroy() });
      await withDeadline(10000, dispatchDb.initialize());
      opened.push({ close: () => dispatchDb.destroy() });
    } catch (e) {
      throw new BootError(
        `cannot connect to Postgres at ${pg.host}:${pg.port} database "${pg.database}" as "${pg.user}" ` +
          `(EVENTMESH_POSTGRES_*): ${reasonOf(e)}`,
        { cause: e },
      );
    }
    if (await db.showMigrations()) {
      throw new BootError(
        `the Postgres schema of database "${pg.database}" is behind this build: run \`npm run migrate\``,
      );
    }
    log.info({ host: pg.host, port: pg.port, database: pg.database }, 'Postgres connected');

    const kafka = createKafka(config.kafka, `${config.instance.id}-${role}`);
    const topics = new TopicAdmin(kafka, config.kafka);
    const producer = new EventProducer(kafka, topics, producerOptionsOf(config, metrics));
    try {
      await withDeadline(config.kafka.connectTimeoutMs * 2, topics.connect());
      opened.push({ close: () => topics.disconnect() });
      await withDeadline(config.kafka.connectTimeoutMs * 2, topics.describeCluster());
      await withDeadline(30000, topics.ensureTopics());
      await withDeadline(config.kafka.connectTimeoutMs * 2, producer.connect());
      opened.push({ close: () => producer.disconnect() });
    } catch (e) {
      throw new BootError(
        `cannot use Kafka at ${config.kafka.brokers.join(',')} (EVENTMESH_KAFKA_BROKERS): ${reasonOf(e)}`,
        { cause: e },
      );
    }
    log.info({ brokers: config.kafka.brokers, topics: config.kafka.topics }, 'Kafka connected');

    let temporal: TemporalHandle;
    try {
      temporal = await withDeadline(
        config.temporal.connectTimeoutMs * 2,
        connectTemporal(config.temporal, tracing.temporal?.clientInterceptors),
      );
    } catch (e) {
      throw new BootError(
        `cannot reach Temporal at ${config.temporal.address} namespace "${config.temporal.namespace}" ` +
          `(EVENTMESH_TEMPORAL_ADDRESS, EVENTMESH_TEMPORAL_NAMESPACE): ${reasonOf(e)}`,
        { cause: e },
      );
    }
    log.info({ address: config.temporal.address, namespace: config.temporal.namespace }, 'Temporal connected');
    return { db, dispatchDb, kafka, topics, producer, temporal, tracing };
  } catch (e) {
    for (const o of opened.reverse()) await o.close().catch(() => undefined);
    throw e;
  }
}

export async function closeDependencies(deps: Dependencies): Promise<void> {
  await shutdownInOrder('dependencies', [
    ['Temporal connection', () => deps.temporal.connection.close()],
    ['Kafka producer', () => deps.producer.disconnect()],
    ['Kafka admin', () => deps.topics.disconnect()],
    ['Postgres pool of the dispatch loops', () => deps.dispatchDb.destroy()],
    ['Postgres pool', () => deps.db.destroy()],
    // Last: the spans of the shutdown itself are exported too.
    ['tracing', () => deps.tracing.shutdown()],
  ]);
}

/** The producer settings of an instance (EVENTMESH_KAFKA_PRODUCE_*, the publish timeout). */
export function producerOptionsOf(config: EventMeshConfig, metrics?: ProducerOptions['metrics']): ProducerOptions {
  return {
    lingerMs: config.kafka.produceLingerMs,
    maxBatchEvents: config.kafka.produceMaxBatchEvents,
    maxInFlight: config.kafka.produceMaxInFlight,
    maxHeldEvents: config.kafka.produceQueueMaxEvents,
    maxHeldBytes: config.kafka.produceQueueMaxBytes,
    publishTimeoutMs: config.kafka.publishTimeoutMs,
    ackTimeoutMs: config.kafka.requestTimeoutMs,
    retryAfterSeconds: config.http.retryAfterSeconds,
    metrics,
  };
}
