import type { DataSource } from 'typeorm';
import { createLogger } from '@libs/logging';

/**
 * The connector runtime's own schema, `connectors`, migrated by the runtime itself at boot (never the event
 * runtime's tables): each migration runs once, in order, in one transaction with its record in
 * `connectors.schema_migrations`, under an advisory lock so replicas booting together do not race.
 */
const MIGRATIONS: { name: string; sql: string }[] = [
  {
    name: '001-jobs',
    sql: `
      CREATE TABLE connectors.jobs (
        id text PRIMARY KEY,
        tenant text NOT NULL,
        name text NOT NULL,
        kind text NOT NULL,
        -- The job's config as created, its secrets sealed (SecretBox: the same keys as webhook secrets).
        config jsonb NOT NULL,
        state text NOT NULL DEFAULT 'RUNNING',
        last_error text,
        last_error_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (tenant, name)
      );
      -- The fenced table (libs/fence): one row per job, its epoch taken by every run that starts.
      CREATE TABLE connectors.job_runs (
        job_id text PRIMARY KEY REFERENCES connectors.jobs (id) ON DELETE CASCADE,
        epoch bigint NOT NULL,
        owner text,
        claimed_at timestamptz,
        renewed_at timestamptz,
        rejected_writes bigint NOT NULL DEFAULT 0
      );
      -- A source's position after what the runtime acknowledged; a sink's counts. Written only under the fence.
      CREATE TABLE connectors.job_positions (
        job_id text PRIMARY KEY REFERENCES connectors.jobs (id) ON DELETE CASCADE,
        position text,
        moved bigint NOT NULL DEFAULT 0,
        dead_lettered bigint NOT NULL DEFAULT 0,
        epoch bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE connectors.dead_letters (
        id bigserial PRIMARY KEY,
        job_id text NOT NULL REFERENCES connectors.jobs (id) ON DELETE CASCADE,
        reason text NOT NULL,
        -- The record as the connector read it (source) or the event (sink), to browse and replay.
        record jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        replayed_at timestamptz
      );
      CREATE INDEX dead_letters_job ON connectors.dead_letters (job_id, id);
    `,
  },
  {
    name: '002-job-moved',
    sql: `
      -- What a job's runs moved, per second, the last minute of it (the throughput in /admin/jobs). Written in the
      -- fenced commit of each round; rows older than a minute are deleted by the same commit.
      CREATE TABLE connectors.job_moved (
        job_id text NOT NULL REFERENCES connectors.jobs (id) ON DELETE CASCADE,
        at timestamptz NOT NULL,
        moved bigint NOT NULL,
        PRIMARY KEY (job_id, at)
      );
    `,
  },
  {
    name: '003-dead-letter-once',
    sql: `
      -- What a letter is of, when the connector names it (a sink: the event's source and id): a record refused again
      -- while its letter waits (a batch split down to it, a redelivery after a crash between the letter and the
      -- answer) adds no letter. A replayed letter no longer counts.
      ALTER TABLE connectors.dead_letters ADD COLUMN key text;
      CREATE UNIQUE INDEX dead_letters_once ON connectors.dead_letters (job_id, key)
       WHERE key IS NOT NULL AND replayed_at IS NULL;
    `,
  },
];

const LOCK = 0x636f6e6e; // 'conn'

export async function migrateConnectorsSchema(db: DataSource): Promise<string[]> {
  const log = createLogger('ConnectorsMigrations');
  const applied: string[] = [];
  await db.transaction(async (manager) => {
    await manager.query('SELECT pg_advisory_xact_lock($1)', [LOCK]);
    await manager.query('CREATE SCHEMA IF NOT EXISTS connectors');
    await manager.query(
      `CREATE TABLE IF NOT EXISTS connectors.schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set(
      ((await manager.query('SELECT name FROM connectors.schema_migrations')) as { name: string }[]).map((r) => r.name),
    );
    for (const m of MIGRATIONS) {
      if (done.has(m.name)) continue;
      await manager.query(m.sql);
      await manager.query('INSERT INTO connectors.schema_migrations (name) VALUES ($1)', [m.name]);
      applied.push(m.name);
    }
  });
  if (applied.length) log.info({ applied }, 'connectors schema migrated');
  return applied;
}
