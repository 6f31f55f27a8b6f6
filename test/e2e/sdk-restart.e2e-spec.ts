import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { Pool } from 'pg';
import { EventMeshClient, PostgresDedupeStore, type Consumer } from '@eventmesh/client';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { testConfig, uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { freePort } from '../support/free-port';
import { NoUpgradeProxy } from '../support/no-upgrade-proxy';
import { SwitchProxy } from '../support/switch-proxy';
import { waitFor } from '../support/wait-for';

/**
 * At least once, handled once: the SDK's consumer across an instance SIGKILLed mid-stream and restarted, and across
 * a restart of the consumer itself with the Postgres dedupe store. Handlers that finish after their connection
 * died cannot ack, so their events come again: the dedupe store acks those without calling the handler. And
 * behind a balancer sending its answers to another instance than the one holding its stream.
 */
describe('@eventmesh/client across restarts', () => {
  const topic = uniqueTopic('sdk-restart');
  const instanceId = `sdk-restart-${randomUUID().slice(0, 6)}`;
  const otherId = `sdk-other-${randomUUID().slice(0, 6)}`;
  let port: number;
  let instance: InstanceProcess;
  let url: string;
  /** The second instance, started by the first case that needs it. */
  let other: InstanceProcess | undefined;
  let temporal: { client: Client; close(): Promise<void> };
  let mesh: EventMeshClient;
  const consumers: Consumer[] = [];
  const pg = testConfig().postgres;
  const pool = new Pool({
    host: pg.host,
    port: pg.port,
    user: pg.user,
    password: pg.password,
    database: pg.database,
    max: 2,
  });

  const start = () =>
    InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_HTTP_PORT: String(port),
    });

  beforeAll(async () => {
    temporal = await temporalClient();
    port = await freePort();
    instance = start();
    url = await instance.ready();
    mesh = new EventMeshClient({ url, topic, source: '/sdk-restart' });
  });
  afterAll(async () => {
    await Promise.all(consumers.map((c) => c.close()));
    await Promise.all([instance.stop(), other?.stop()]);
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId), dispatchWorkflowIdOf(otherId)]);
    await temporal.close();
    await pool.end();
  });

  /** A handler that counts its calls per event id and holds each one `ms`; `running` is how many run now. */
  const slowHandler = (ms: number) => {
    const calls = new Map<string, number>();
    const state = { calls, running: 0 };
    const handler = async (event: { id: string }) => {
      calls.set(event.id, (calls.get(event.id) ?? 0) + 1);
      state.running++;
      await new Promise((r) => setTimeout(r, ms));
      state.running--;
    };
    return { state, handler };
  };
  const publishN = async (type: string, n: number) =>
    (await mesh.publishMany(Array.from({ length: n }, (_, i) => ({ type, data: { i } })))).map((r) => r.id);
  const calledMoreThanOnce = (calls: Map<string, number>) => [...calls].filter(([, n]) => n !== 1);
  const otherUrl = async () => {
    other ??= InstanceProcess.spawn({ EVENTMESH_INSTANCE_ID: otherId, EVENTMESH_KAFKA_TOPICS: topic });
    return new URL(await other.ready());
  };

  it('loses nothing and hands no event twice when the instance is SIGKILLed mid-stream and restarted', async () => {
    const type = `sdk.kill.${randomUUID().slice(0, 6)}`;
    const sub = (await mesh.subscriptions.create({ protocol: 'STREAM', topic, filters: [{ exact: { type } }] })).id;
    const { state, handler } = slowHandler(300);
    const states: string[] = [];
    const consumer = mesh.consume(sub, handler, { window: 10, reconnect: { initialDelayMs: 100, maxDelayMs: 1000 } });
    consumer.on('state', (s) => states.push(s.state));
    consumers.push(consumer);
    await waitFor('connected', () => consumer.state === 'connected', { timeoutMs: 30000 });
    const first = await publishN(type, 60);
    await waitFor('30 handled and handlers running', () => consumer.stats.handled >= 30 && state.running > 0, {
      timeoutMs: 60000,
      intervalMs: 10,
    });
    instance.child.kill('SIGKILL');
    expect((await instance.exit(60000)).signal).toBe('SIGKILL');
    instance = start();
    await instance.ready();
    const second = await publishN(type, 40);
    const sent = [...first, ...second];
    await waitFor('every event handled', () => sent.every((id) => state.calls.has(id)), { timeoutMs: 120000 });
    await waitFor('every event acked', () => consumer.stats.acked >= sent.length, { timeoutMs: 60000 });
    expect(sent.filter((id) => !state.calls.has(id))).toEqual([]);
    expect(calledMoreThanOnce(state.calls)).toEqual([]);
    expect(state.calls.size).toBe(100);
    expect(consumer.stats.duplicates).toBeGreaterThanOrEqual(1);
    expect(consumer.stats.reconnects).toBeGreaterThanOrEqual(1);
    expect(states).toContain('reconnecting');
  }, 300000);

  it('with the Postgres dedupe store, a restarted consumer does not hand on what the one before it handled', async () => {
    const type = `sdk.pgdedupe.${randomUUID().slice(0, 6)}`;
    const table = `sdk_dedupe_${randomUUID().slice(0, 8)}`;
    // The stranded deliveries come again once their ack timeout has passed. What is checked (a handled event is not
    // handed on again) does not depend on how long that is, so it is 3 s (ten handler times), not the default 30 s;
    // a running handler's delivery is extended meanwhile (ackDeadlineMs, the subscription's timeout by default).
    const sub = (
      await mesh.subscriptions.create({
        protocol: 'STREAM',
        topic,
        filters: [{ exact: { type } }],
        config: { ackTimeoutMs: 3000 },
      })
    ).id;
    const { state, handler } = slowHandler(300);
    const firstStore = new PostgresDedupeStore({ pool, table });
    const first = mesh.consume(sub, handler, { window: 10, dedupe: firstStore });
    await waitFor('connected', () => first.state === 'connected', { timeoutMs: 30000 });
    const sent = await publishN(type, 40);
    await waitFor('15 handled and handlers running', () => first.stats.handled >= 15 && state.running > 0, {
      timeoutMs: 60000,
      intervalMs: 10,
    });
    // The consumer goes away while handlers run: they finish and are recorded, but their acks have no connection.
    // close() closes the connection before it first awaits, so the handlers running just after the call are the
    // ones stranded (read after it resolves, they may all have finished: a 300 ms handler against a slow close).
    const closed = first.close();
    const stranded = state.running;
    await closed;
    await waitFor('the stranded handlers finished', () => state.running === 0);
    expect(stranded).toBeGreaterThan(0);

    const url = `postgres://${pg.user}:${pg.password}@${pg.host}:${pg.port}/${pg.database}`;
    const secondStore = new PostgresDedupeStore({ connectionString: url, table });
    const second = new EventMeshClient({ url: instance.url! }).consume(sub, handler, {
      window: 10,
      dedupe: secondStore,
    });
    consumers.push(second);
    await waitFor('every event handled', () => sent.every((id) => state.calls.has(id)), { timeoutMs: 120000 });
    await waitFor('the stranded ones acked as duplicates', () => second.stats.duplicates >= 1, { timeoutMs: 60000 });
    expect(calledMoreThanOnce(state.calls)).toEqual([]);
    await second.close();
    await secondStore.close();
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
  }, 300000);

  it('moves to another instance when its connection is moved there: nothing lost, nothing handed twice', async () => {
    const proxy = new SwitchProxy(port);
    try {
      const moved = await otherUrl();
      const type = `sdk.move.${randomUUID().slice(0, 6)}`;
      const sub = (await mesh.subscriptions.create({ protocol: 'STREAM', topic, filters: [{ exact: { type } }] })).id;
      const { state, handler } = slowHandler(300);
      const consumer = new EventMeshClient({ url: await proxy.listen() }).consume(sub, handler, {
        window: 10,
        reconnect: { initialDelayMs: 100, maxDelayMs: 1000 },
      });
      consumers.push(consumer);
      await waitFor('connected', () => consumer.state === 'connected', { timeoutMs: 30000 });
      const sent = await publishN(type, 60);
      await waitFor('20 handled and handlers running', () => consumer.stats.handled >= 20 && state.running > 0, {
        timeoutMs: 60000,
        intervalMs: 10,
      });
      proxy.moveTo(Number(moved.port));
      await waitFor('every event handled', () => sent.every((id) => state.calls.has(id)), { timeoutMs: 120000 });
      await waitFor('the stranded ones acked as duplicates', () => consumer.stats.duplicates >= 1, {
        timeoutMs: 60000,
      });
      expect(calledMoreThanOnce(state.calls)).toEqual([]);
      expect(consumer.stats.reconnects).toBeGreaterThanOrEqual(1);
      const clients = (await (await fetch(`${instance.url}/subscriptions/${sub}/clients`)).json()) as {
        clients: { instance: string }[];
      };
      expect(clients.clients.map((c) => c.instance)).toEqual([otherId]);
      await consumer.close();
    } finally {
      await proxy.close();
    }
  }, 300000);

  it('behind a balancer that sends its answers to another instance than the one holding its stream: each event handled once, every ack taken', async () => {
    const balancer = new NoUpgradeProxy(url, { postsTo: (await otherUrl()).origin });
    const type = `sdk.balanced.${randomUUID().slice(0, 6)}`;
    const sub = (await mesh.subscriptions.create({ protocol: 'STREAM', topic, filters: [{ exact: { type } }] })).id;
    const { state, handler } = slowHandler(0);
    const consumer = new EventMeshClient({ url: await balancer.listen() }).consume(sub, handler);
    consumers.push(consumer);
    try {
      await waitFor('connected', () => consumer.state === 'connected', { timeoutMs: 30000 });
      const sent = await publishN(type, 30);
      await waitFor('every event acked', () => consumer.stats.acked >= 30, { timeoutMs: 60000 });
      expect(consumer.transport).toBe('sse');
      expect(balancer.postsElsewhere).toBeGreaterThanOrEqual(1);
      expect([...state.calls.keys()].sort()).toEqual(sent.sort());
      expect(calledMoreThanOnce(state.calls)).toEqual([]);
      expect(consumer.stats).toMatchObject({ acked: 30, duplicates: 0, nacked: 0 });
    } finally {
      await consumer.close();
      await balancer.close();
    }
  }, 300000);
});
