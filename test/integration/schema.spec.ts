import type { DataSource } from 'typeorm';
import { createDataSource } from '@libs/storage';
import { testConfig } from '../support/env';

describe('schema (real Postgres)', () => {
  let db: DataSource;
  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'schema-spec');
    await db.initialize();
  });
  afterAll(() => db.destroy());

  it('has every migration applied', async () => {
    expect(await db.showMigrations()).toBe(false);
  });

  it('matches the entities exactly: the migrations leave nothing for synchronize to do', async () => {
    const pending = await db.driver.createSchemaBuilder().log();
    expect(pending.upQueries.map((q) => q.query)).toEqual([]);
  });

  it('holds the runtime tables', async () => {
    const rows: { table_name: string }[] = await db.query(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`,
    );
    expect(rows.map((r) => r.table_name)).toEqual([
      'a2a_agents',
      'a2a_push_configs',
      'a2a_push_dead_letters',
      'a2a_task_events',
      'a2a_tasks',
      'acl_rules',
      'api_keys',
      'dead_letters',
      'delivery_retries',
      'dispatch_runs',
      'gate_policy_versions',
      'partition_leases',
      'pending_requests',
      'presence_holders',
      'publisher_secrets',
      'quota_usage',
      'schema_migrations',
      'session_agents',
      'session_homes',
      'session_usage',
      'signature_replays',
      'skipped_ranges',
      'stream_presence',
      'subscription_offsets',
      'subscriptions',
      'tenant_quotas',
      'tenant_topics',
      'topic_grants',
    ]);
  });
});
