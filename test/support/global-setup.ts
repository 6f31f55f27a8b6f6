import './libs-alias';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { Client } from 'pg';
import { loadConfig } from '@libs/config';
import { createDataSource } from '@libs/storage';
import { TEST_DATABASE, testEnv } from './env';

/**
 * Once per jest run: the servers are up (scripts/infra.sh starts what is missing), the build is current (e2e
 * tests run the built instance), and the test database is rebuilt from the migrations.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.EVENTMESH_TEST_SETUP_DONE === '1') return;
  process.env.EVENTMESH_TEST_SETUP_DONE = '1';
  const root = path.resolve(__dirname, '../..');
  execFileSync('bash', [path.join(root, 'scripts/infra.sh'), 'start', 'all'], {
    stdio: 'inherit',
    env: { ...process.env, ...testEnv() },
  });
  execFileSync('bash', [path.join(root, 'scripts/prepare.sh')], { stdio: 'inherit' });

  const pg = loadConfig(testEnv()).postgres;
  const admin = new Client({
    host: pg.host,
    port: pg.port,
    user: pg.user,
    password: pg.password,
    database: 'postgres',
  });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${TEST_DATABASE}" WITH (FORCE)`);
    await admin.query(`CREATE DATABASE "${TEST_DATABASE}"`);
  } finally {
    await admin.end();
  }
  const db = createDataSource(pg, 'eventmesh-test-setup');
  await db.initialize();
  try {
    await db.runMigrations({ transaction: 'each' });
  } finally {
    await db.destroy();
  }
}
