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
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/** What the tests read of `/admin/jobs` answers (a job, or an error). */
interface JobBody {
  id: string;
  position: string | null;
  deadLettered: number;
  lag: { events: number | null; counts: string; error?: string };
  throughput: { eventsPerSecond: number };
  lastError: string | null;
  run: { epoch: number; owner: string; renewedAt: string; rejectedWrites: number };
  spec: { config: { connection: { password: string } } };
  code?: string;
  field?: string;
}

/**
 * The connector runtime as processes: a real instance, two (then three) connector replicas, an application
 * database with an outbox and a sink table. Outbox -> mesh -> table in append mode: rows written by transactions
 * held open and committed out of id order, an invalid row, a row the sink cannot write, the replica running the
 * jobs SIGKILLed (the other takes them over), and a SIGSTOPped replica whose position write after the takeover is
 * refused by the fence. After each step the sink table holds each outbox row exactly once.
 */
describe('connector runtime: outbox -> mesh -> table', () => {
  const { tag, topic, instanceId, outbox, sinkTable } = pipelineNames('cx');
  let instance: InstanceProcess;
  const replicas = new Map<string, InstanceProcess>();
  let admin: string;
  let app: Awaited<ReturnType<typeof applicationDatabase>>;
  let db: PgClient;
  let temporal: Awaited<ReturnType<typeof temporalClient>>;
  let sourceJob: string;
  let sinkJob: string;
  let inserted = 0;
  /** Order ids dead-lettered on purpose (by the source, by the sink): never in the sink table. */
  const deadLettered: number[] = [];

  const api = adminCaller<JobBody>(() => admin);
  const jobView = async (id: string) => (await api('GET', `/admin/jobs/${id}`)).body!;
  const startReplica = async (name: string) => {
    const replica = spawnConnectors(name, instance.url!);
    replicas.set(name, replica);
    return replica.ready();
  };
  /** Inserts `n` orders in one committed transaction; returns their order ids. */
  const insertOrders = async (n: number, client: PgClient = db) => {
    const ids = Array.from({ length: n }, () => ++inserted);
    await client.query(
      `INSERT INTO ${outbox} (aggregatetype, aggregateid, type, payload)
       SELECT 'order', o::text, 'order.created', jsonb_build_object('orderId', o, 'amount', o * 10) FROM unnest($1::int[]) o`,
      [ids],
    );
    return ids;
  };
  const sinkCounts = async () =>
    (
      await db.query<{ order_id: number; n: string }>(
        `SELECT order_id, count(*) AS n FROM ${sinkTable} GROUP BY order_id ORDER BY order_id`,
      )
    ).rows.map((r) => [r.order_id, Number(r.n)]);
  /** Waits until every order id inserted so far is in the sink table; then asserts each is there exactly once. */
  const expectExactlyOnce = async (skip: number[] = []) => {
    const want = Array.from({ length: inserted }, (_, i) => i + 1).filter((id) => !skip.includes(id));
    await waitFor(
      `all ${want.length} orders in the sink table`,
      async () => (await db.query(`SELECT count(DISTINCT order_id) AS n FROM ${sinkTable}`)).rows[0].n >= want.length,
      { timeoutMs: 120000, intervalMs: 250 },
    );
    expect(await sinkCounts()).toEqual(want.map((id) => [id, 1]));
  };

  beforeAll(async () => {
    temporal = await temporalClient();
    app = await applicationDatabase();
    db = await app.client();
    await createOutbox(db, outbox);
    await db.query(`CREATE TABLE ${sinkTable} (event_id text NOT NULL, order_id int NOT NULL, amount int NOT NULL)`);
    instance = InstanceProcess.spawn({ EVENTMESH_INSTANCE_ID: instanceId, EVENTMESH_KAFKA_TOPICS: `${topic}-order` });
    await instance.ready();
    await Promise.all([startReplica(`a-${tag}`), startReplica(`b-${tag}`)]).then(([a]) => (admin = a));
  }, 180000);

  afterAll(async () => {
    for (const r of replicas.values()) r.child.kill('SIGCONT');
    for (const id of [sourceJob, sinkJob]) if (id) await api('DELETE', `/admin/jobs/${id}`).catch(() => undefined);
    for (const r of replicas.values()) await r.stop(0);
    await instance?.stop();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await temporal.close();
    await db?.query(`DROP TABLE IF EXISTS ${outbox}, ${sinkTable}`);
    await db?.end();
  }, 180000);

  it('refuses a job whose config is invalid (the field named) or whose target is the runtime’s own database', async () => {
    const bad = await api('POST', '/admin/jobs', {
      name: `bad-${tag}`,
      kind: 'postgres-outbox',
      config: { connection: app.connection, table: outbox, columns: { id: 'Id; DROP' } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'INVALID_REQUEST', field: 'config.columns.id' });
    // A table sink recording its events by the table's own key can only append.
    const dedupe = await api('POST', '/admin/jobs', {
      name: `dedupe-${tag}`,
      kind: 'postgres-table',
      config: {
        subscriptionId: 'any',
        connection: app.connection,
        table: 'public.orders',
        mode: 'upsert',
        key: ['event_id'],
        columns: { event_id: 'id', origin: 'source' },
        dedupe: 'table',
      },
    });
    expect(dedupe.status).toBe(400);
    expect(dedupe.body).toMatchObject({ code: 'INVALID_REQUEST', field: 'config.dedupe' });
    const own = await api('POST', '/admin/jobs', {
      name: `own-${tag}`,
      kind: 'postgres-outbox',
      config: {
        connection: { ...app.connection, database: process.env.EVENTMESH_TEST_POSTGRES_DATABASE ?? 'eventmesh_test' },
        table: outbox,
      },
    });
    expect(own.status).toBe(400);
    expect(own.body).toMatchObject({
      code: 'SINK_NOT_ALLOWED',
      field: 'config.connection.host',
      reason: 'own_database',
    });
    expect((await api('GET', '/admin/jobs')).body).toEqual([]);
  });

  it('publishes rows committed out of id order without skipping any; an invalid row and an unwritable event are dead-lettered', async () => {
    const sub = await sinkSubscription(instance.url!, `${topic}-order`);
    const created = await api('POST', '/admin/jobs', {
      name: `sink-${tag}`,
      kind: 'postgres-table',
      config: {
        subscriptionId: sub.id,
        connection: app.connection,
        table: sinkTable,
        mode: 'append',
        columns: { event_id: 'id', order_id: 'data.orderId', amount: 'data.amount' },
      },
    });
    expect(created.status).toBe(201);
    sinkJob = created.body!.id;
    expect(created.body!.spec.config.connection.password).toBe('(sealed)');
    const source = await api('POST', '/admin/jobs', {
      name: `outbox-${tag}`,
      kind: 'postgres-outbox',
      config: { connection: app.connection, table: outbox, topicTemplate: `${topic}-\${aggregateType}`, batchSize: 50 },
    });
    expect(source.status).toBe(201);
    sourceJob = source.body!.id;
    await waitFor('the outbox job runs', async () => (await jobView(sourceJob)).run.epoch >= 1, { timeoutMs: 60000 });

    // Three writers take ids 1-5, 6-10, 11-15 in that order and commit in the reverse order.
    const writers = await Promise.all([1, 2, 3].map(() => app.client()));
    for (const w of writers) {
      await w.query('BEGIN');
      await insertOrders(5, w);
    }
    const before = await jobView(sourceJob);
    await writers[2].query('COMMIT');
    await writers[1].query('COMMIT');
    // The loop has polled at least once after those commits with the first writer still open: it moved, or it
    // renewed its epoch twice (the first renewal seen may close a poll that began before the commits).
    const renewals = new Set<string>();
    await waitFor('a poll after the commits while the first writer is open', async () => {
      const now = await jobView(sourceJob);
      if (now.run.renewedAt !== before.run.renewedAt) renewals.add(now.run.renewedAt);
      return now.position !== before.position || renewals.size >= 2;
    });
    await writers[0].query('COMMIT');
    await Promise.all(writers.map((w) => w.end()));
    // A row without a type cannot become an event; an amount that is no integer cannot become a row.
    await db.query(
      `INSERT INTO ${outbox} (aggregatetype, aggregateid, type, payload) VALUES ('order', 'x', NULL, '{}')`,
    );
    const noType = ++inserted;
    const badAmount = ++inserted;
    deadLettered.push(noType, badAmount);
    await db.query(
      `INSERT INTO ${outbox} (aggregatetype, aggregateid, type, payload) VALUES ('order', 'y', 'order.created', $1)`,
      [{ orderId: badAmount, amount: 'not a number' }],
    );
    await insertOrders(5);
    await expectExactlyOnce(deadLettered);
    // Everything moved: no outbox row after the source's position, no event of the subscription unacknowledged
    // (the runtime commits the acked offsets after the acks: waited for); both moved in the last minute.
    await waitFor('both jobs without lag', async () => {
      const [s, k] = await Promise.all([jobView(sourceJob), jobView(sinkJob)]);
      return s.lag.events === 0 && k.lag.events === 0;
    });
    for (const id of [sourceJob, sinkJob]) expect((await jobView(id)).throughput.eventsPerSecond).toBeGreaterThan(0);
    expect((await jobView(sourceJob)).lastError).toBeNull();

    const sourceDead = (await api('GET', `/admin/jobs/${sourceJob}/dead-letters`)).body as unknown as {
      reason: string;
    }[];
    expect(sourceDead.map((d) => d.reason)).toEqual(['column type: no event type']);
    await waitFor(
      'the sink dead-lettered the unwritable event',
      async () => (await jobView(sinkJob)).deadLettered === 1,
    );
    const sinkDead = (await api('GET', `/admin/jobs/${sinkJob}/dead-letters`)).body as unknown as {
      record: { data: unknown };
    }[];
    expect(sinkDead.map((d) => d.record.data)).toEqual([{ orderId: badAmount, amount: 'not a number' }]);
  }, 180000);

  it('SIGKILL of the replica running the jobs: the other takes them over, and every row is written exactly once', async () => {
    const owner = (await jobView(sourceJob)).run.owner as string;
    const victim = replicas.get(owner)!;
    await insertOrders(100);
    victim.child.kill('SIGKILL');
    replicas.delete(owner);
    const survivor = [...replicas.keys()][0];
    admin = replicas.get(survivor)!.url!;
    for (let i = 0; i < 5; i++) await insertOrders(40);
    await waitFor('the survivor runs the outbox job', async () => (await jobView(sourceJob)).run.owner === survivor, {
      timeoutMs: 60000,
    });
    await expectExactlyOnce(deadLettered);
    expect((await jobView(sinkJob)).run.owner).toBe(survivor);
  }, 180000);

  it('a SIGSTOPped replica: another takes the job over, and its position write after the takeover is refused by the fence', async () => {
    await startReplica(`c-${tag}`);
    const before = await jobView(sourceJob);
    const stopped = before.run.owner;
    // Ask a replica that keeps running.
    admin = [...replicas].find(([name]) => name !== stopped)![1].url!;
    // Hold the outbox locked so the running loop is inside a round (its poll waiting) when its replica stops: after
    // SIGCONT it has rows in hand and goes on to publish them and commit the position.
    const locker = await app.client();
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${outbox} IN ACCESS EXCLUSIVE MODE`);
    await waitFor('the outbox poll waits on the lock', async () => {
      const { rows } = await db.query(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%pg_snapshot_xmin%'`,
      );
      return Number(rows[0].n) > 0;
    });
    replicas.get(stopped)!.child.kill('SIGSTOP');
    await insertOrders(30, locker);
    await locker.query('COMMIT');
    await locker.end();
    await waitFor(
      'another replica holds the outbox job',
      async () => {
        const now = await jobView(sourceJob);
        return now.run.owner !== stopped && now.run.epoch > before.run.epoch;
      },
      { timeoutMs: 60000 },
    );
    replicas.get(stopped)!.child.kill('SIGCONT');
    await waitFor(
      'the resumed replica’s write was refused',
      async () => (await jobView(sourceJob)).run.rejectedWrites > before.run.rejectedWrites,
      { timeoutMs: 60000 },
    );
    await insertOrders(30);
    await expectExactlyOnce(deadLettered);
  }, 180000);
});
