import { DataSource } from 'typeorm';
import type { EventMeshConfig } from '../config';
import { ENTITIES } from './entities';
import { MIGRATIONS } from './migrations';
import { postgresConnectionOptions } from './postgres-connection';

/**
 * The runtime's Postgres DataSource: entities and migrations only, never `synchronize`. Its pool's connections
 * have the settings of {@link postgresConnectionOptions} (keepalive, timeouts, a deadline on every query).
 */
export function createDataSource(pg: EventMeshConfig['postgres'], applicationName = 'eventmesh'): DataSource {
  return new DataSource({
    type: 'postgres',
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
}
