import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { EventMeshClient } from '@eventmesh/client';
import { Kafka, logLevel } from 'kafkajs';
import { Client } from 'pg';
import { ConnectorsFixture } from './connectors-fixture';
import {
  benchConfig,
  benchEnv,
  brokerPid,
  createTopics,
  median,
  meterCpu,
  postgresPid,
  printTable,
  ROOT,
  RunResult,
  startInstanceProcess,
  summarize,
  temporalPid,
  until,
} from './support';

/**
 * The connector runtime against hand-written baselines, in the same run on the same servers (issue 35):
 * - outbox -> mesh: the outbox job (connector replica -> SDK -> instance -> Kafka) against a minimal relay (a loop
 *   reading the outbox table by id and calling kafkajs `sendBatch`, at least once only); each arm first moves 500
 *   warm-up rows (the job's run started, the relay's producer connected, both code paths compiled), then N rows
 *   committed at once, timed from the commit until the job's position is past them (the relay: until its last batch
 *   was acked);
 * - mesh -> table: the table sink job (a STREAM subscription through the SDK, a ledger row per event) against a
 *   kafkajs consumer group inserting each batch in one statement; each arm first writes 500 warm-up events (the
 *   job's stream open, the group joined), then N events are published (the same SDK publish in both), timed from
 *   the first publish until the arm's committed count says the table holds them all (checked by a count of the
 *   table after); then the same with the job's `dedupe: table` (no ledger:
 *   the table's unique index on (source, id)) against the group writing a table with that index too;
 * - outbox insert -> table row: both jobs at once, rows inserted at BENCH_PACE per second, each row's latency from
 *   its insert (clock_timestamp) to its sink row's insert (clock_timestamp), p50/p99.
 * Each comparison runs BENCH_ROUNDS rounds (default 5), the arms alternating, every round printed, and the median
 * of the ratios; CPU per event of the processes involved. `npm run bench:connectors` (BENCH_EVENTS: rows per round).
 */
/**
 * Rows per round. At 20,000 an arm lasted 0.4-1.0 s and a round's ratio moved with the host's moments (the sink's
 * rounds 0.60-0.91 in one run); at 100,000 the sink job's rounds were 25,081-26,045 rows/s in one run (2026-12-07).
 */
const EVENTS = Number(process.env.BENCH_EVENTS ?? 100000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const PACE = Number(process.env.BENCH_PACE ?? 200);
const BATCH = 500;
/** Rows (events) each arm moves before its clock starts. */
const WARM_UP = 500;
/**
 * BENCH_CONNECTORS_ONLY=outbox: the outbox -> mesh comparison alone (no sink arms, no latency run); `sink`: the
 * mesh -> table comparisons alone; `dedupe`: the `dedupe: table` comparison alone.
 */
const ONLY = process.env.BENCH_CONNECTORS_ONLY;
if (ONLY !== undefined && ONLY !== 'outbox' && ONLY !== 'sink' && ONLY !== 'dedupe')
  throw new Error(`BENCH_CONNECTORS_ONLY must be outbox, sink or dedupe, not ${ONLY}`);
const OUTBOX_ONLY = ONLY === 'outbox';
const SINK_ONLY = ONLY === 'sink' || ONLY === 'dedupe';
const DEDUPE_ONLY = ONLY === 'dedupe';
/** The processes this run started: stopped however it ends. */
const children: ChildProcess[] = [];

const env = benchEnv({});
const config = benchConfig();
const pg = config.postgres;
// BENCH_CONNECTORS_APP_DB: the application database (outbox and sink tables), so two runs on one server do not share it.
const APP_DB = process.env.BENCH_CONNECTORS_APP_DB ?? 'eventmesh_bench_connectors';
const connection = { host: pg.host, port: pg.port, database: APP_DB, user: pg.user, password: pg.password };

async function appClient(database = APP_DB): Promise<Client> {
  const c = new Client({ ...connection, database });
  await c.connect();
  return c;
}

/** A connector replica process (the built `npm run connectors`), its admin URL once it listens. */
async function startConnectors(meshUrl: string) {
  // BENCH_CONNECTORS_NODE_ARGS go to the replica's node, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it.
  const nodeArgs = (process.env.BENCH_CONNECTORS_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, path.join(ROOT, 'dist/apps/connectors/src/main.js')], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      ...env,
      EVENTMESH_CONNECTORS_HTTP_PORT: '0',
      EVENTMESH_CONNECTORS_MESH_URL: meshUrl,
      EVENTMESH_CONNECTORS_REPLICA_ID: `bench-${randomUUID().slice(0, 6)}`,
      EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const url = await until('the connector runtime listens', () => /listening on (http:\/\/\S+)/.exec(out)?.[1], 60000);
  return { url, child };
}

async function main(): Promise<void> {
  const admin = await appClient(pg.database);
  if ((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [APP_DB])).rowCount === 0)
    await admin.query(`CREATE DATABASE ${APP_DB}`);
  await admin.end();
  const db = await appClient();
  const positions = await appClient(pg.database);
  const tag = randomUUID().slice(0, 6);
  const topic = `bench-cx-${tag}`;
  const kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'bench-connectors', logLevel: logLevel.NOTHING });
  await createTopics(kafka, [topic], 3);
  const instance = await startInstanceProcess({
    ...env,
    EVENTMESH_INSTANCE_ID: `bench-cx-${tag}`,
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_KAFKA_TOPICS: topic,
  });
  children.push(instance.child);
  const connectors = await startConnectors(instance.url);
  const mesh = new EventMeshClient({ url: instance.url });
  const pids = {
    instance: instance.child.pid,
    connectors: connectors.child.pid,
    broker: brokerPid(),
    postgres: await postgresPid(),
    temporal: temporalPid(),
    bench: 'self' as const,
  };
  // A schema of the run's own: each run starts with an empty sink ledger, as on a fresh clone (one shared by every
  // run grew by each run's rows, so a run's figures depended on the runs before it).
  const schema = `bench_cx_${tag}`;
  await db.query(`CREATE SCHEMA ${schema}`);
  const fx = new ConnectorsFixture(db, connectors.url, instance.url, mesh, topic, schema, connection, BATCH);
  const finish = async () => {
    connectors.child.kill('SIGTERM');
    await instance.stop();
    await db.query(`DROP SCHEMA ${schema} CASCADE`);
    await db.end();
    await positions.end();
    process.exit(0);
  };

  /**
   * Both sink arms start their clock warm: a first batch of WARM_UP events written to the table (connections open,
   * code paths compiled), as the group arm's consumer has joined and the job's stream is open before it.
   */
  const warmUp = async (table: string) => {
    await fx.publishAll(-WARM_UP, WARM_UP);
    await until(
      'the warm-up events in the table',
      async () => (await fx.rowsIn(table)) >= WARM_UP || undefined,
      600000,
      20,
    );
  };

  /** A job's committed count of what it moved, read from the connector runtime's position store. */
  const movedBy = async (jobId: string) =>
    Number(
      (await positions.query('SELECT moved FROM connectors.job_positions WHERE job_id = $1', [jobId])).rows[0]?.moved ??
        0,
    );
  /** A sink arm wrote each event once: the table holds exactly the warm-up's and the round's rows. */
  const expectRows = async (table: string) => {
    const rows = await fx.rowsIn(table);
    if (rows !== WARM_UP + EVENTS) throw new Error(`${table} holds ${rows} rows, not ${WARM_UP + EVENTS}`);
  };
  /** Runs `load`, waits until `done` holds, and answers the figures from before the load to then. */
  const timed = async (name: string, load: () => Promise<unknown>, done: () => Promise<boolean>) => {
    const cpu = meterCpu(pids);
    const started = process.hrtime.bigint();
    await load();
    await until(name, async () => ((await done()) ? true : undefined), 600000, 20);
    return { ...summarize(name, EVENTS, started), cpu: cpu() };
  };
  /** Outbox -> mesh through the job: from the rows' commit until the job's position is past them. */
  const outboxViaJob = async (): Promise<RunResult> => {
    const table = await fx.outbox();
    const id = await fx.outboxJob(table);
    await until(
      'the outbox job runs',
      async () => (await fx.api('GET', `/admin/jobs/${id}`))!.run.epoch ?? undefined,
      60000,
    );
    // The committed count itself (what /admin/jobs shows), read from the connector runtime's position store: asking
    // the replica every 20 ms would put the admin API's work on the job's process.
    const moved = () => movedBy(id);
    await fx.insertRows(table, 1, WARM_UP);
    await until('the warm-up rows published', async () => ((await moved()) >= WARM_UP ? true : undefined), 600000, 20);
    const result = await timed(
      'outbox -> mesh: outbox job',
      () => fx.insertRows(table, WARM_UP + 1, EVENTS),
      async () => (await moved()) >= WARM_UP + EVENTS,
    );
    await fx.deleteJob(id);
    return result;
  };
  /** The baseline relay: a loop reading the outbox by id, kafkajs sendBatch, at least once. */
  const outboxViaRelay = async (): Promise<RunResult> => {
    const table = await fx.outbox();
    const producer = kafka.producer();
    await producer.connect();
    let last = 0;
    const relay = async (count: number) => {
      let sent = 0;
      while (sent < count) {
        const { rows } = await db.query<{ id: string; aggregateid: string; type: string; payload: unknown }>(
          `SELECT id, aggregateid, type, payload FROM ${table} WHERE id > $1 ORDER BY id LIMIT ${BATCH}`,
          [last],
        );
        if (rows.length === 0) continue;
        await producer.sendBatch({
          acks: -1,
          topicMessages: [
            {
              topic,
              messages: rows.map((r) => ({
                key: r.aggregateid,
                value: JSON.stringify({ id: r.id, type: r.type, source: '/outbox', data: r.payload }),
              })),
            },
          ],
        });
        last = Number(rows[rows.length - 1].id);
        sent += rows.length;
      }
    };
    await fx.insertRows(table, 1, WARM_UP);
    await relay(WARM_UP);
    const result = await timed(
      'outbox -> mesh: kafkajs relay',
      async () => {
        await fx.insertRows(table, WARM_UP + 1, EVENTS);
        await relay(EVENTS);
      },
      async () => true,
    );
    await producer.disconnect();
    return result;
  };
  /**
   * Mesh -> table through the sink job: from the first publish until the table holds every event. `identified`:
   * the job with `dedupe: table`, on a table with a unique index on (source, id).
   */
  const tableViaJob = async (identified = false): Promise<RunResult> => {
    const table = await fx.sinkTable(identified);
    const id = await fx.sinkJob(table, identified ? 'table' : 'ledger');
    await warmUp(table);
    // Done when the job's committed count says so (it is committed after the rows): polling `count(*)` of the
    // table every 20 ms cost Postgres a scan per poll for as long as the arm ran, so the slower arm paid more.
    const result = await timed(
      `mesh -> table: table sink job${identified ? ', dedupe table' : ''}`,
      () => fx.publishAll(1, EVENTS),
      async () => (await movedBy(id)) >= WARM_UP + EVENTS,
    );
    await expectRows(table);
    await fx.deleteJob(id);
    return result;
  };
  /**
   * The baseline: a kafkajs consumer group inserting each batch in one statement. `identified`: into the same table
   * as the `dedupe: table` job (the source too, its unique index on (source, id), `ON CONFLICT DO NOTHING`).
   */
  const tableViaGroup = async (identified = false): Promise<RunResult> => {
    const table = await fx.sinkTable(identified);
    const consumer = kafka.consumer({ groupId: `bench-cx-${randomUUID()}` });
    const admin = kafka.admin();
    await admin.connect();
    const ends = await admin.fetchTopicOffsets(topic);
    await admin.disconnect();
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: false });
    let joined = false;
    consumer.on(consumer.events.GROUP_JOIN, () => (joined = true));
    // The rows its inserts committed, counted here (the job's arm reads its committed count).
    let inserted = 0;
    await consumer.run({
      eachBatch: async ({ batch }) => {
        // The runtime's records: the context attributes as ce_ headers, the data as the value.
        const events = batch.messages.map((m) => ({
          id: String(m.headers!.ce_id),
          source: String(m.headers!.ce_source),
          data: JSON.parse(m.value!.toString()) as { orderId: number; at: number },
        }));
        const values = [events.map((e) => e.id), events.map((e) => e.data.orderId), events.map((e) => e.data.at)];
        const { rowCount } = await (identified
          ? db.query(
              `INSERT INTO ${table} (event_source, event_id, order_id, at)
               SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::float8[]) ON CONFLICT DO NOTHING`,
              [events.map((e) => e.source), ...values],
            )
          : db.query(
              `INSERT INTO ${table} (event_id, order_id, at) SELECT * FROM unnest($1::text[], $2::int[], $3::float8[])`,
              values,
            ));
        inserted += rowCount ?? 0;
      },
    });
    await until('the group joined', () => joined || undefined, 60000);
    // From where the log ends now: a group without offsets that resolves "latest" after the first publish skips it.
    for (const { partition, offset } of ends) consumer.seek({ topic, partition, offset });
    await warmUp(table);
    const result = await timed(
      `mesh -> table: kafkajs consumer group${identified ? ', unique (source, id)' : ''}`,
      () => fx.publishAll(1, EVENTS),
      async () => inserted >= WARM_UP + EVENTS,
    );
    await expectRows(table);
    await consumer.disconnect();
    return result;
  };

  const rounds: {
    outbox?: [RunResult, RunResult];
    table?: [RunResult, RunResult];
    identified?: [RunResult, RunResult];
  }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const even = r % 2 === 0;
    const ob = SINK_ONLY
      ? []
      : even
        ? [await outboxViaJob(), await outboxViaRelay()]
        : [await outboxViaRelay(), await outboxViaJob()].reverse();
    const sinkPair = async (identified: boolean) =>
      (even
        ? [await tableViaJob(identified), await tableViaGroup(identified)]
        : [await tableViaGroup(identified), await tableViaJob(identified)].reverse()) as [RunResult, RunResult];
    const tb = OUTBOX_ONLY || DEDUPE_ONLY ? undefined : await sinkPair(false);
    const ti = OUTBOX_ONLY ? undefined : await sinkPair(true);
    rounds.push({ outbox: SINK_ONLY ? undefined : (ob as [RunResult, RunResult]), table: tb, identified: ti });
    console.log(`\nround ${r + 1} of ${ROUNDS}:`);
    printTable([...ob, ...(tb ?? []), ...(ti ?? [])]);
    console.log(
      `ratios: ${[
        ...(SINK_ONLY ? [] : [`outbox job / relay ${(ob[0].perSecond / ob[1].perSecond).toFixed(2)}x`]),
        ...(tb ? [`sink job / consumer group ${(tb[0].perSecond / tb[1].perSecond).toFixed(2)}x`] : []),
        ...(ti ? [`sink job, dedupe table / consumer group ${(ti[0].perSecond / ti[1].perSecond).toFixed(2)}x`] : []),
      ].join(', ')}`,
    );
  }
  const ratioOf = (pick: (r: (typeof rounds)[number]) => [RunResult, RunResult] | undefined) =>
    rounds.map((r) => pick(r)![0].perSecond / pick(r)![1].perSecond);
  const perRound = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(', ');
  if (ONLY !== undefined) {
    console.log(`\n${ROUNDS} rounds of ${EVENTS} rows each:`);
    if (OUTBOX_ONLY) {
      const ratios = ratioOf((r) => r.outbox);
      console.log(`- outbox job / relay, median ${median(ratios).toFixed(2)}x (${perRound(ratios)})`);
    } else
      for (const [what, pick] of [
        ...(DEDUPE_ONLY ? [] : ([['sink job / consumer group', (r: (typeof rounds)[number]) => r.table]] as const)),
        ['sink job, dedupe table / consumer group', (r: (typeof rounds)[number]) => r.identified] as const,
      ]) {
        const ratios = ratioOf(pick);
        console.log(`- ${what}, median ${median(ratios).toFixed(2)}x (${perRound(ratios)}; goal 0.8x)`);
      }
    await finish();
  }

  // Outbox insert -> table row, both jobs running, rows inserted at PACE per second.
  const latencyOutbox = await fx.outbox();
  const latencyTable = await fx.sinkTable();
  const sink = await fx.sinkJob(latencyTable);
  const source = await fx.outboxJob(latencyOutbox);
  const total = PACE * 10;
  // The jobs' first rows wait while the jobs start (their stream opens, their first polls): 200-750 ms for the
  // first 20-140 rows in earlier runs, which made the p99 a figure of the start. Rows up to WARM_UP go first.
  await fx.insertRows(latencyOutbox, 1, WARM_UP);
  await until(
    'the warm-up rows in the table',
    async () => (await fx.rowsIn(latencyTable)) >= WARM_UP || undefined,
    600000,
    50,
  );
  const cpu = meterCpu(pids);
  const started = process.hrtime.bigint();
  for (let i = WARM_UP; i < WARM_UP + total; i += PACE / 10) {
    const tick = Date.now();
    await fx.insertRows(latencyOutbox, i + 1, PACE / 10);
    await new Promise((r) => setTimeout(r, Math.max(0, 100 - (Date.now() - tick))));
  }
  await until(
    'every row in the table',
    async () => ((await fx.rowsIn(latencyTable)) >= WARM_UP + total ? true : undefined),
    600000,
    50,
  );
  const latencies = (
    await db.query<{ ms: number }>(
      `SELECT extract(epoch FROM written_at) * 1000 - at AS ms FROM ${latencyTable} WHERE order_id > $1`,
      [WARM_UP],
    )
  ).rows.map((r) => Number(r.ms));
  const pipeline = { ...summarize(`outbox insert -> table row (${PACE}/s)`, total, started, latencies), cpu: cpu() };
  for (const id of [source, sink]) await fx.deleteJob(id);

  console.log(`\n${ROUNDS} rounds of ${EVENTS} rows each; the median of each arm and of the ratios:`);
  const med = (pick: (r: (typeof rounds)[number]) => RunResult | undefined) =>
    median(rounds.map((r) => pick(r)!.perSecond));
  console.log(
    `- outbox -> mesh: job ${med((r) => r.outbox?.[0]).toFixed(0)}/s, relay ${med((r) => r.outbox?.[1]).toFixed(0)}/s, ratio ${median(rounds.map((r) => r.outbox![0].perSecond / r.outbox![1].perSecond)).toFixed(2)}x (goal 0.7x)`,
  );
  console.log(
    `- mesh -> table: job ${med((r) => r.table?.[0]).toFixed(0)}/s, group ${med((r) => r.table?.[1]).toFixed(0)}/s, ratio ${median(ratioOf((r) => r.table)).toFixed(2)}x (${perRound(ratioOf((r) => r.table))}; goal 0.8x)`,
  );
  console.log(
    `- mesh -> table, dedupe table: job ${med((r) => r.identified?.[0]).toFixed(0)}/s, group ${med((r) => r.identified?.[1]).toFixed(0)}/s, ratio ${median(ratioOf((r) => r.identified)).toFixed(2)}x (${perRound(ratioOf((r) => r.identified))}; goal 0.8x)`,
  );
  printTable([pipeline]);

  await finish();
}

main().catch((e) => {
  console.error(e);
  for (const child of children) child.kill('SIGTERM');
  process.exit(1);
});
