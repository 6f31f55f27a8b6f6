import { ConfigError, loadConfig } from '@libs/config';
import { reasonOf } from '@libs/runtime';
import { createDataSource } from '@libs/storage';

/** Applies pending migrations to the configured database and says which ran (`npm run migrate`). */
async function main(): Promise<void> {
  const config = loadConfig();
  const pg = config.postgres;
  // A migration may rewrite a large table: no statement timeout, no query deadline.
  const db = createDataSource({ ...pg, queryTimeoutMs: 0 }, 'eventmesh-migrate');
  try {
    await db.initialize();
  } catch (e) {
    throw new Error(`cannot connect to Postgres at ${pg.host}:${pg.port} database "${pg.database}": ${reasonOf(e)}`);
  }
  try {
    const ran = await db.runMigrations({ transaction: 'each' });
    const names = ran.map((m) => m.name).join(', ');
    process.stdout.write(
      `migrations: ${ran.length === 0 ? 'schema up to date' : `applied ${names}`} (database ${pg.database})\n`,
    );
  } finally {
    await db.destroy();
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`eventmesh: ${e instanceof ConfigError ? e.message : reasonOf(e)}\n`);
  process.exit(1);
});
