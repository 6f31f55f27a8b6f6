import type { Client as PgClient } from 'pg';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import {
  adminCaller,
  applicationDatabase,
  createOutbox,
  pipelineNames,
  sinkSubscription,
  spawnConnectors,
} from '../support/connectors-app';
import { freePort } from '../support/free-port';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { restoreServers, startPostgres, stopPostgresImmediately } from './servers';

const ROWS = 10000;
/** Rows inserted per step: one step before the first fault, one after each of the four. */
const STEP = ROWS / 5;

interface JobBody {
  id: string;
  run: { owner: string | null };
}

/**
 * Exactly once under faults (issue 35): outbox -> mesh -> table sink in append mode, 10,000 rows, while the
 * connector replica running a job is SIGKILLed twice, the event runtime instance SIGKILLed once (and started again
 * at the same address) and Postgres stopped at once and started. Each fault hits rows in flight: it comes after the
 * sink table grew past the rows of the step before and before it holds all of them. At the end the sink table holds
 * each outbox row exactly once, counted by the row's id. Postgres is restarted, so this runs in the fault tier
 * against servers of its own (scripts/test.sh).
 */
describe('faults: connectors', () => {
  const { tag, topic, instanceId, outbox, sinkTable } = pipelineNames('cxf');
  let port: number;
  let instance: InstanceProcess;
  const replicas = new Map<string, InstanceProcess>();
  let replicaCount = 0;
  let app: Awaited<ReturnType<typeof applicationDatabase>>;
  let temporal: Awaited<ReturnType<typeof temporalClient>>;
  const jobs: string[] = [];
  let inserted = 0;
  /** Per fault: the rows inserted and those in the sink table when it struck. */
  const faults: string[] = [];

  const api = adminCaller<JobBody>(() => [...replicas.values()][0].url!);
  const startInstance = async () => {
    instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      EVENTMESH_HTTP_PORT: String(port),
      EVENTMESH_KAFKA_TOPICS: `${topic}-order`,
    });
    await instance.ready(120000);
  };
  const startReplica = async () => {
    const name = `r${++replicaCount}-${tag}`;
    const replica = spawnConnectors(name, `http://127.0.0.1:${port}`);
    replicas.set(name, replica);
    await replica.ready(120000);
  };
  /** A new connection for each query: Postgres is restarted under the test. */
  const query = async <R extends Record<string, unknown>>(sql: string, params: unknown[] = []) => {
    const client: PgClient = await app.client();
    try {
      return (await client.query<R>(sql, params)).rows;
    } finally {
      await client.end();
    }
  };
  const insertStep = async () => {
    const ids = Array.from({ length: STEP }, () => ++inserted);
    await query(
      `INSERT INTO ${outbox} (aggregatetype, aggregateid, type, payload)
       SELECT 'order', (o % 50)::text, 'order.created', jsonb_build_object('orderId', o) FROM unnest($1::int[]) o`,
      [ids],
    );
  };
  const sinkRows = async () => Number((await query<{ n: string }>(`SELECT count(*) AS n FROM ${sinkTable}`))[0].n);
  /**
   * Inserts a step's rows and waits until the sink table grew past the previous step's (rows are in flight), then
   * records the fault about to strike.
   */
  const inFlight = async (fault: string) => {
    const before = inserted;
    await insertStep();
    let rows = 0;
    await waitFor(`the sink table past ${before} rows`, async () => (rows = await sinkRows()) > before, {
      timeoutMs: 120000,
      intervalMs: 100,
    });
    faults.push(`${fault} at ${rows}/${inserted}`);
  };
  /** SIGKILLs the replica running `jobId` and starts another, so two run again. */
  const killOwnerOf = async (jobId: string) => {
    const owner = (await api('GET', `/admin/jobs/${jobId}`)).body!.run.owner!;
    replicas.get(owner)!.child.kill('SIGKILL');
    replicas.delete(owner);
    await startReplica();
  };

  beforeAll(async () => {
    temporal = await temporalClient();
    app = await applicationDatabase();
    const db = await app.client();
    await createOutbox(db, outbox).finally(() => db.end());
    await query(`CREATE TABLE ${sinkTable} (event_id text NOT NULL, order_id int NOT NULL)`);
    port = await freePort();
    await startInstance();
    await Promise.all([startReplica(), startReplica()]);
  }, 240000);

  afterAll(async () => {
    await restoreServers();
    for (const id of jobs) await api('DELETE', `/admin/jobs/${id}`).catch(() => undefined);
    for (const r of replicas.values()) await r.stop(0);
    await instance?.stop();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await temporal.close();
    await query(`DROP TABLE IF EXISTS ${outbox}, ${sinkTable}`).catch(() => undefined);
  }, 240000);

  it('10,000 rows, a replica SIGKILLed twice, the instance SIGKILLed once, Postgres restarted once: each row once in the table', async () => {
    const startedAt = Date.now();
    const sub = await sinkSubscription(instance.url!, `${topic}-order`);
    for (const [kind, config] of [
      [
        'postgres-table',
        {
          subscriptionId: sub.id,
          connection: app.connection,
          table: sinkTable,
          mode: 'append',
          columns: { event_id: 'id', order_id: 'data.orderId' },
        },
      ],
      [
        'postgres-outbox',
        { connection: app.connection, table: outbox, topicTemplate: `${topic}-\${aggregateType}`, batchSize: 500 },
      ],
    ] as const) {
      const created = await api('POST', '/admin/jobs', { name: `${kind}-${tag}`, kind, config });
      expect(created.status).toBe(201);
      jobs.push(created.body!.id);
    }
    const [sinkJob, sourceJob] = jobs;

    await inFlight('source replica SIGKILL');
    await killOwnerOf(sourceJob);

    await inFlight('instance SIGKILL');
    instance.child.kill('SIGKILL');
    await startInstance();

    await inFlight('sink replica SIGKILL');
    await killOwnerOf(sinkJob);

    await inFlight('Postgres stop -m immediate');
    await stopPostgresImmediately();
    await startPostgres();

    await insertStep();
    await waitFor(
      `all ${ROWS} rows in the sink table`,
      async () =>
        Number((await query<{ n: string }>(`SELECT count(DISTINCT order_id) AS n FROM ${sinkTable}`))[0].n) >= ROWS,
      { timeoutMs: 300000, intervalMs: 500 },
    );
    const counts = await query<{ rows: string; distinct: string; min: number; max: number }>(
      `SELECT count(*) AS rows, count(DISTINCT order_id) AS distinct, min(order_id) AS min, max(order_id) AS max
         FROM ${sinkTable}`,
    );
    const twice = await query<{ order_id: number; n: string }>(
      `SELECT order_id, count(*) AS n FROM ${sinkTable} GROUP BY order_id HAVING count(*) > 1 ORDER BY order_id LIMIT 10`,
    );
    process.stdout.write(
      `connectors fault case: ${ROWS} outbox rows; faults (sink rows/inserted) ${faults.join(', ')}; sink table ${JSON.stringify(counts[0])}; ` +
        `written more than once ${JSON.stringify(twice)}; ${Date.now() - startedAt} ms\n`,
    );
    expect(twice).toEqual([]);
    expect(counts[0]).toEqual({ rows: String(ROWS), distinct: String(ROWS), min: 1, max: ROWS });
  }, 600000);
});
