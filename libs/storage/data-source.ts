import { DataSource } from 'typeorm';
import type { EventMeshConfig } from '../config';
import { ENTITIES } from './entities';
import { MIGRATIONS } from './migrations';

/** The runtime's Postgres DataSource: entities and migrations only, never `synchronize`. */
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
    extra: { max: pg.poolSize, connectionTimeoutMillis: 5000 },
  });
}
