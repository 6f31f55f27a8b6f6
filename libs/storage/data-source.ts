import { DataSource } from 'typeorm';
import type { EventMeshConfig } from '@libs/config';
import { ENTITIES } from './entities';
import { MIGRATIONS } from './migrations';
import { leakDetectingPool, pgWithPool, PoolLeakDetector } from './pool-leak-detection';
import { postgresConnectionOptions } from './postgres-connection';

const detectors = new WeakMap<DataSource, PoolLeakDetector>();

/**
 * The runtime's Postgres DataSource: entities and migrations only, never `synchronize`. Its pool's connections
 * have the settings of {@link postgresConnectionOptions} (keepalive, timeouts, a deadline on every query), and with
 * `leakDetectionThresholdMs` its checkouts are watched ({@link PoolLeakDetector}).
 */
export function createDataSource(pg: EventMeshConfig['postgres'], applicationName = 'eventmesh'): DataSource {
  const detector =
    pg.leakDetectionThresholdMs > 0 ? new PoolLeakDetector(pg.leakDetectionThresholdMs, applicationName) : undefined;
  const db = new DataSource({
    type: 'postgres',
    ...(detector && { driver: pgWithPool(leakDetectingPool(detector)) }),
    host: pg.host,
    port: pg.port,
    username: pg.user,
    password: pg.password,
    database: pg.database,
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsTableName: 'schema_migrations',
    migrationsTransactionMode: 'each',
    synchronize: false,
    logging: false,
    applicationName,
    extra: { ...postgresConnectionOptions(pg, applicationName), max: pg.poolSize },
  });
  if (detector) detectors.set(db, detector);
  return db;
}

/**
 * The dispatch loops' own DataSource (LOCAL_STICKY_PULL's dispatch runs, PARTITION_OWNED_PULL's partition loops):
 * their claims and renewals, every fenced write, their refreshes and retry sweeps, on a pool of
 * `dispatchPoolSize` connections apart from the main one, with the same settings. The main pool's other users (the
 * gateway's requests, presence renewals, quotas, A2A tasks, dead-letter replays, takeovers) can then neither starve
 * delivery of connections nor make it wait behind their dead ones (docs/failure-matrix.md, the half-open case).
 */
export function createDispatchDataSource(pg: EventMeshConfig['postgres'], applicationName: string): DataSource {
  return createDataSource({ ...pg, poolSize: pg.dispatchPoolSize }, applicationName);
}

/** The leak detection of `db`'s pool (its counts, its log); undefined when it is off. */
export function poolLeakDetectorOf(db: DataSource): PoolLeakDetector | undefined {
  return detectors.get(db);
}
