import 'reflect-metadata';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import Fastify from 'fastify';
import { DataSource } from 'typeorm';
import { CONNECTOR_JOB_QUEUE } from '../../../contracts';
import { createLogger } from '@libs/logging';
import { SecretBox } from '@libs/security';
import { AdminGate } from './admin/admin-gate';
import { registerJobsRoutes } from './admin/jobs-routes';
import { loadConnectorsConfig } from './connectors-config';
import { createConnectorJobActivities } from './jobs/job-activities';
import { TargetGuard } from './jobs/target-guard';
import { JobRunStore } from './store/job-run-store';
import { JobStore } from './store/job-store';
import { migrateConnectorsSchema } from './store/migrations';

/** `npm run connectors`: one connector runtime replica (README "Move data in and out", docs/connectors.md). */
async function main(): Promise<void> {
  const log = createLogger('Connectors');
  const config = loadConnectorsConfig(process.env);
  const { shared } = config;
  const pg = shared.postgres;
  const db = new DataSource({
    type: 'postgres',
    host: pg.host,
    port: pg.port,
    username: pg.user,
    password: pg.password,
    database: pg.database,
    extra: { max: 10, application_name: `eventmesh-connectors ${config.replicaId}` },
  });
  await db.initialize();
  await migrateConnectorsSchema(db);

  const secrets = SecretBox.fromConfig(shared);
  const jobs = new JobStore(db);
  const runs = new JobRunStore(db);
  const targets = new TargetGuard(shared);
  const gate = new AdminGate(shared, db);
  const shutdown = new AbortController();

  const connection = await Connection.connect({ address: shared.temporal.address });
  const temporal = new Client({ connection, namespace: shared.temporal.namespace });
  const worker = await Worker.create({
    connection: await NativeConnection.connect({ address: shared.temporal.address }),
    namespace: shared.temporal.namespace,
    taskQueue: CONNECTOR_JOB_QUEUE,
    ...(await workflowCode()),
    activities: createConnectorJobActivities({
      jobs,
      runs,
      secrets,
      targets,
      meshUrl: config.meshUrl,
      replicaId: config.replicaId,
      shutdown: shutdown.signal,
    }),
  });
  const running = worker.run();

  const app = Fastify({ logger: false });
  app.get('/health', async () => ({ status: 'ok', replica: config.replicaId, adminGate: gate.mode }));
  registerJobsRoutes(app, {
    gate,
    jobs,
    runs,
    secrets,
    targets,
    temporal,
    meshUrl: config.meshUrl,
    runMs: config.runMs,
    heartbeatMs: config.heartbeatMs,
  });
  const url = await app.listen({ host: config.host, port: config.port });
  log.info({ replica: config.replicaId, mesh: config.meshUrl, adminGate: gate.mode }, 'connectors started');
  // The line the operator (and the process tests) wait for, whatever the log level.
  process.stdout.write(`connectors ${config.replicaId} listening on ${url}\n`);

  const stop = async () => {
    log.info({ replica: config.replicaId }, 'connectors stopping');
    shutdown.abort();
    worker.shutdown();
    await running.catch(() => undefined);
    await app.close();
    await gate.close();
    await connection.close();
    await db.destroy();
  };
  process.once('SIGTERM', () => void stop().then(() => process.exit(0)));
  process.once('SIGINT', () => void stop().then(() => process.exit(0)));
  await running;
}

/** The bundle `npm run build` wrote (the runtime's workflows, connector jobs among them); else bundled now. */
async function workflowCode() {
  const built = path.resolve(__dirname, '../../../workflow-bundle.js');
  if (existsSync(built)) return { workflowBundle: { codePath: built } };
  return {
    workflowBundle: await bundleWorkflowCode({
      workflowsPath: require.resolve(path.resolve(__dirname, '../../../workflows')),
    }),
  };
}

main().catch((e: Error) => {
  createLogger('Connectors').fatal({ error: e.message, stack: e.stack }, 'connectors failed to start');
  process.exit(1);
});
