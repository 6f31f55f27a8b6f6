import { randomUUID } from 'node:crypto';
import { PartitionReader } from '@libs/kafka';
import { Deliverer, DispatchLoop, DispatchProgress } from '@libs/delivery';
import { frameToKafkaMessage } from '@libs/frame';
import { LeaseStore, SkippedRangeStore, SubscriptionEntity } from '@libs/storage';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import { DeliveryStack, dispatchLoopOf, openDeliveryStack } from '../support/delivery-stack';
import { testConfig, uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';
import { ReceivedRequest, WebhookReceiver } from '../support/webhook-receiver';

/** How often a loop reads its subscriptions again (an operator's pause or seek is seen within it). */
const REFRESH_INTERVAL_MS = 1000;

/**
 * An operator's seek, pause and resume of a subscription, through the gateway's routes, with real dispatch loops
 * run as PARTITION_OWNED_PULL runs them (one loop per partition, each fenced by its partition lease), Postgres,
 * Kafka and a loopback sink. Two subscriptions read the topic: what one is told to do never reaches the other.
 */
describe('subscription offsets, seek, pause and resume (real Postgres, Kafka, loops and gateway)', () => {
  const topic = uniqueTopic('sub-ops');
  const owner = `owner-${randomUUID().slice(0, 8)}`;
  let stack: DeliveryStack;
  let leases: LeaseStore;
  let sink: WebhookReceiver;
  let gateway: RunningInstance;
  let a: string;
  let b: string;
  let epoch = 0;
  const stops: (() => Promise<unknown>)[] = [];
  const cleanups: (() => Promise<unknown>)[] = [];

  afterEach(async () => {
    // Last in, first out: a loop stops before its subscription and its gateway go.
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  beforeAll(async () => {
    stack = await openDeliveryStack('sub-ops-spec', topic, 2, 5000);
    leases = new LeaseStore(stack.db, 2000);
    sink = new WebhookReceiver();
    await sink.start();
    gateway = await startInstance(
      testConfig({
        EVENTMESH_KAFKA_TOPICS: topic,
        EVENTMESH_HTTP_PORT: '0',
        EVENTMESH_DELIVERY_TOPOLOGY: 'PARTITION_OWNED_PULL',
        EVENTMESH_INSTANCE_ID: `gw-${owner}`,
      }),
      { roles: ['gateway'] },
    );
    a = await subscription('a');
    b = await subscription('b');
  });

  afterAll(async () => {
    await stopOwners();
    await gateway?.close();
    await sink.stop();
    await stack.close();
  });

  /** A webhook subscription of the topic from its start, delivering to the sink's path `/hook/<name>`. */
  async function subscription(name: string, instanceId = owner): Promise<string> {
    const id = randomUUID();
    await stack.db.manager.insert(SubscriptionEntity, {
      id,
      topic,
      protocol: 'HTTP',
      sink: `${sink.url}/${name}`,
      instanceId,
      status: 'ACTIVE',
      config: {},
    });
    await stack.offsets.commit(
      [0, 1].map((partition) => ({ subscriptionId: id, topic, partition, nextOffset: 0, epoch: 0 })),
    );
    return id;
  }

  /** The owner's loops: one per partition, each under a newly claimed lease epoch, as a partition's owner runs it. */
  async function startOwners(): Promise<{ progress: () => (DispatchProgress | undefined)[] }> {
    epoch++;
    const reports: (DispatchProgress | undefined)[] = [undefined, undefined];
    for (const partition of [0, 1]) {
      expect(await leases.claim(topic, partition, owner, epoch)).toEqual({ claimed: true });
      const reader = new PartitionReader(stack.kafka);
      await reader.connect();
      const sender: Deliverer = {
        send: (target, frame, messageId, signal) => stack.webhooks.send(target, frame, messageId, signal),
      };
      const loop = new DispatchLoop({
        instanceId: owner,
        subscriptions: {
          activeFor: () => stack.subscriptions.activeOnTopic(topic),
          disable: (id, why, m) => stack.subscriptions.disable(id, why, m),
        },
        offsets: stack.offsets,
        deadLetters: stack.deadLetters,
        retries: stack.retries,
        skipped: new SkippedRangeStore(stack.db),
        reader,
        topics: stack.topics,
        sender,
        scope: { topic, partition },
        fence: leases.fenceFor(topic, partition, epoch),
        // The refresh interval and fetch wait an instance runs with (apps/worker/src/worker-host.ts).
        options: {
          pollMaxWaitMs: 500,
          batchMaxEvents: 100,
          refreshIntervalMs: REFRESH_INTERVAL_MS,
          retryInitialMs: 10,
          retryMaxMs: 20,
          maxAttempts: 5,
        },
      });
      const stop = new AbortController();
      // A loop a test left running is fenced by the next claim: its end is awaited by stopOwners, never unhandled.
      const running = loop
        .run(stop.signal, Date.now() + 120000, (p) => (reports[partition] = p))
        .catch((e: unknown) => e);
      stops.push(async () => {
        stop.abort();
        await running;
        await reader.disconnect();
      });
    }
    return { progress: () => reports };
  }

  async function stopOwners(): Promise<void> {
    for (const stop of stops.splice(0)) await stop();
  }

  /** `count` events to each partition; their ids, in offset order per partition. */
  async function publish(label: string, count: number): Promise<string[]> {
    const ids: string[] = [];
    for (const partition of [0, 1]) {
      const messages = [];
      for (let n = 0; n < count; n++) {
        const id = `${label}-p${partition}-${n}`;
        ids.push(id);
        messages.push({
          ...frameToKafkaMessage({
            id,
            source: '/sub-ops-spec',
            type: 'spec',
            extensions: {},
            data: Buffer.from(id),
          }),
          partition,
        });
      }
      await stack.producer.send({ topic, acks: -1, messages });
    }
    return ids;
  }

  /** Waits until the subscription's stored offsets are `at` in both partitions. */
  const committed = (id: string, at: number) =>
    waitFor(
      `${id === a ? 'a' : id === b ? 'b' : id} committed at ${at}`,
      async () => {
        const positions = await stack.offsets.positionsOf([id]);
        return positions.length === 2 && positions.every((p) => p.nextOffset === at);
      },
      { timeoutMs: 60000 },
    );

  const idOf = (r: ReceivedRequest) => String(r.headers['ce-id']);
  const to = (name: string) => sink.requests.filter((r) => r.path === `/hook/${name}`).map(idOf);
  const times = (ids: string[], id: string) => ids.filter((x) => x === id).length;
  const hasAll = (name: string, ids: string[], n = 1) => ids.every((id) => times(to(name), id) >= n);

  async function call(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await fetch(`${gateway.url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  it('a commit never interleaves with a seek: one waiting for the seek row lock is refused after it, and so is every later one of the old generation', async () => {
    const id = randomUUID();
    await stack.db.manager.insert(SubscriptionEntity, {
      id,
      topic,
      protocol: 'HTTP',
      sink: `${sink.url}/fence`,
      instanceId: `nobody-${owner}`,
      status: 'ACTIVE',
      config: {},
    });
    await stack.offsets.commit([{ subscriptionId: id, topic, partition: 0, nextOffset: 5, epoch: 0 }]);
    const runner = stack.db.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    // Deleted whatever happens: the later tests count the subscriptions the loops dispatch.
    cleanups.push(() => stack.db.manager.delete(SubscriptionEntity, { id }));
    try {
      const seek = await stack.offsets.seek(id, [{ topic, partition: 0, nextOffset: 1 }], runner.manager);
      expect(seek).toEqual({ applied: true, generation: 1, moves: [{ topic, partition: 0, from: 5, to: 1 }] });
      // A lane of generation 0 commits while the seek is not committed yet: its upsert waits for the row.
      const racing = stack.offsets.commit([
        { subscriptionId: id, topic, partition: 0, nextOffset: 7, epoch: 0, generation: 0 },
      ]);
      await waitFor(
        'the commit waiting for the seek row lock',
        async () => {
          const waiting: unknown[] = await stack.db.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO subscription_offsets%' AND query LIKE '%unnest($1::uuid[]%'`,
          );
          return waiting.length > 0;
        },
        { timeoutMs: 60000, intervalMs: 20 },
      );
      await runner.commitTransaction();
      const [result] = await racing;
      expect(result.applied).toBe(false);
    } finally {
      if (runner.isTransactionActive) await runner.rollbackTransaction();
      await runner.release();
    }
    expect(await stack.offsets.positionsOf([id])).toEqual([
      { subscriptionId: id, topic, partition: 0, nextOffset: 1, epoch: 0, generation: 1 },
    ]);
    // Later commits of the old generation are refused as SEEKED; the new generation's go forward from the seek.
    const [stale] = await stack.offsets.commit([
      { subscriptionId: id, topic, partition: 0, nextOffset: 9, epoch: 0, generation: 0 },
    ]);
    expect(stale).toMatchObject({ applied: false, rejected: 'SEEKED', current: { nextOffset: 1, generation: 1 } });
    const [fresh] = await stack.offsets.commit([
      { subscriptionId: id, topic, partition: 0, nextOffset: 2, epoch: 0, generation: 1 },
    ]);
    expect(fresh.applied).toBe(true);
  }, 120000);

  it('seek to earliest redelivers the history to that subscription only, fenced against the partition owners', async () => {
    await startOwners();
    const history = await publish('h', 3);
    await waitFor('the history at both subscriptions', () => hasAll('a', history) && hasAll('b', history), {
      timeoutMs: 60000,
    });
    await committed(a, 3);

    const view = await call('GET', `/subscriptions/${a}/offsets`);
    expect(view).toEqual({
      status: 200,
      body: {
        subscriptionId: a,
        topic,
        status: 'ACTIVE',
        topology: 'PARTITION_OWNED_PULL',
        generation: 0,
        partitions: [0, 1].map((partition) => ({ partition, committed: 3, start: 0, end: 3, lag: 0, owner, epoch })),
      },
    });

    const seek = await call('POST', `/subscriptions/${a}/offsets/seek`, { to: 'earliest' });
    expect(seek).toEqual({
      status: 200,
      body: {
        subscriptionId: a,
        topic,
        to: 'earliest',
        generation: 1,
        partitions: [0, 1].map((partition) => ({ partition, from: 3, to: 0 })),
        parkedForgotten: 0,
      },
    });
    // The owners' loops restart a's lanes from offset 0: the history again, at a only.
    await waitFor('the history a second time at a', () => hasAll('a', history, 2), { timeoutMs: 60000 });
    const after = await publish('after', 1);
    await waitFor('the next events at both', () => hasAll('a', after) && hasAll('b', after), { timeoutMs: 60000 });
    for (const id of history) {
      expect(times(to('a'), id)).toBe(2);
      expect(times(to('b'), id)).toBe(1);
    }
    await committed(a, 4);
    await committed(b, 4);
  }, 420000);

  it('seeks by timestamp and to explicit offsets, and refuses offsets outside the log', async () => {
    const before = to('a').length;
    const at = new Date().toISOString();
    const later = await publish('t', 2);
    await waitFor('the new events at a', () => hasAll('a', later), { timeoutMs: 60000 });
    await committed(a, 6);

    // Every event from the time on, in each partition, again: exactly the two batches published after it.
    const byTime = await call('POST', `/subscriptions/${a}/offsets/seek`, { to: at });
    expect(byTime.status).toBe(200);
    expect(byTime.body.partitions).toEqual([0, 1].map((partition) => ({ partition, from: 6, to: 4 })));
    await waitFor('the events after the time, again', () => hasAll('a', later, 2), { timeoutMs: 60000 });
    expect(to('a').slice(before).sort()).toEqual([...later, ...later].sort());
    await committed(a, 6);

    // Partition 1 back to offset 5: its last event again; partition 0 is not named and stays.
    const explicit = await call('POST', `/subscriptions/${a}/offsets/seek`, { offsets: [{ partition: 1, offset: 5 }] });
    expect(explicit).toMatchObject({
      status: 200,
      body: { to: 'offsets', generation: 3, partitions: [{ partition: 1, from: 6, to: 5 }] },
    });
    await waitFor('t-p1-1 a third time', () => times(to('a'), 't-p1-1') === 3, { timeoutMs: 60000 });
    expect(times(to('a'), 't-p0-1')).toBe(2);
    await committed(a, 6);

    expect(
      await call('POST', `/subscriptions/${a}/offsets/seek`, { offsets: [{ partition: 0, offset: 7 }] }),
    ).toMatchObject({
      status: 400,
      body: { code: 'OFFSET_OUT_OF_RANGE', partition: 0, start: 0, end: 6 },
    });
    expect(
      await call('POST', `/subscriptions/${a}/offsets/seek`, { offsets: [{ partition: 2, offset: 0 }] }),
    ).toMatchObject({
      status: 400,
      body: { code: 'OFFSET_OUT_OF_RANGE' },
    });
    expect(await call('POST', `/subscriptions/${a}/offsets/seek`, { to: 'yesterday' })).toMatchObject({
      status: 400,
      body: { code: 'INVALID_REQUEST' },
    });
    expect(await call('POST', `/subscriptions/${randomUUID()}/offsets/seek`, { to: 'latest' })).toMatchObject({
      status: 404,
      body: { code: 'SUBSCRIPTION_NOT_FOUND' },
    });
    await stopOwners();
  }, 420000);

  it('pause: delivery stops within a second under load, nothing is delivered while events accumulate (also across a restart of the owners), and resume delivers them from the committed offset', async () => {
    const owners = await startOwners();
    const before = to('a').filter((id) => !id.startsWith('load')).length;
    // A steady load: one event per partition, the next once b has it; a is paused after the fifth, and the load
    // goes on for three refresh intervals after that (a pause never seen would deliver to a until the end).
    const load: string[] = [];
    let pausedAt = 0;
    for (let n = 0; pausedAt === 0 || Date.now() < pausedAt + 3 * REFRESH_INTERVAL_MS; n++) {
      const ids = await publish(`load${n}`, 1);
      load.push(...ids);
      await waitFor('the load event at b', () => hasAll('b', ids), { timeoutMs: 60000, intervalMs: 5 });
      if (n === 4) {
        expect(await call('POST', `/subscriptions/${a}/pause`)).toEqual({
          status: 200,
          body: { subscriptionId: a, status: 'PAUSED', changed: true },
        });
        pausedAt = Date.now();
      }
    }
    const lastAtA = Math.max(
      ...sink.requests.filter((r) => r.path === '/hook/a' && load.includes(idOf(r))).map((r) => r.receivedAt),
    );
    const stoppedAfterMs = lastAtA - pausedAt;
    process.stdout.write(
      `pause: the last delivery to a arrived ${stoppedAfterMs} ms after the pause answered (load of ${load.length} events)\n`,
    );
    // Within the refresh interval is the promise, so it is timed, on the sink's clock (the arrivals) from the
    // pause's answer. The margin, half an interval, is for the round that refreshes and a delivery already on its
    // way, which a loaded 2-core host (the loops, the gateway, the sink and this load in one process) makes later;
    // a pause never seen would go on delivering until the load ends, three intervals after the pause.
    expect(stoppedAfterMs).toBeLessThan(REFRESH_INTERVAL_MS + REFRESH_INTERVAL_MS / 2);
    expect(await call('POST', `/subscriptions/${a}/pause`)).toEqual({
      status: 200,
      body: { subscriptionId: a, status: 'PAUSED', changed: false },
    });
    expect((await call('GET', `/subscriptions/${a}`)).body).toMatchObject({ id: a, status: 'PAUSED' });
    await waitFor('both loops dispatching only b', () => owners.progress().every((p) => p?.subscriptions === 1), {
      timeoutMs: 60000,
    });
    const delivered = to('a').length;

    const during = await publish('paused', 3);
    await waitFor('the events at b', () => hasAll('b', during), { timeoutMs: 60000 });
    // The owners restart (new lease epochs, new loops): the pause is in Postgres, and holds.
    await stopOwners();
    const restarted = await startOwners();
    await waitFor(
      'the new loops running a round',
      () => restarted.progress().every((p) => p !== undefined && p.rounds > 0),
      { timeoutMs: 60000 },
    );
    const acrossRestart = await publish('restarted', 2);
    await waitFor('those at b too', () => hasAll('b', acrossRestart), { timeoutMs: 60000 });
    expect(to('a').length).toBe(delivered);
    const view = (await call('GET', `/subscriptions/${a}/offsets`)).body as {
      status: string;
      partitions: { committed: number; end: number; lag: number }[];
    };
    expect(view.status).toBe('PAUSED');
    for (const p of view.partitions) {
      expect(p.lag).toBe(p.end - p.committed);
      expect(p.lag).toBeGreaterThanOrEqual(5);
    }

    expect(await call('POST', `/subscriptions/${a}/resume`)).toEqual({
      status: 200,
      body: { subscriptionId: a, status: 'ACTIVE', changed: true },
    });
    await waitFor('everything published meanwhile, at a', () => hasAll('a', [...load, ...during, ...acrossRestart]), {
      timeoutMs: 60000,
    });
    await committed(a, view.partitions[0].end);
    // From the committed offset: what was published while paused once each, and nothing from before the load again.
    for (const id of [...during, ...acrossRestart]) expect(times(to('a'), id)).toBe(1);
    expect(
      to('a').filter((id) => !id.startsWith('load') && !id.startsWith('paused') && !id.startsWith('restarted')),
    ).toHaveLength(before);
    await stopOwners();
  }, 480000);

  it('LOCAL_STICKY_PULL: the offsets show the pinned instance and its dispatch-run epoch, and a seek restarts the lanes of its dispatch-run fenced loop', async () => {
    const instanceId = `sticky-${owner}`;
    const sticky = await startInstance(
      testConfig({ EVENTMESH_KAFKA_TOPICS: topic, EVENTMESH_HTTP_PORT: '0', EVENTMESH_INSTANCE_ID: instanceId }),
      { roles: ['gateway'] },
    );
    cleanups.push(() => sticky.close());
    const c = await subscription('c', instanceId);
    cleanups.push(() => stack.db.manager.delete(SubscriptionEntity, { id: c }));
    const run = await stack.runs.claim(instanceId, 'subscription-operations spec');
    const reader = new PartitionReader(stack.kafka);
    await reader.connect();
    const loop = dispatchLoopOf(
      stack,
      reader,
      instanceId,
      run,
      { send: (target, frame, messageId, signal) => stack.webhooks.send(target, frame, messageId, signal) },
      { pollMaxWaitMs: 500, refreshIntervalMs: 1000, maxAttempts: 5 },
    );
    const stop = new AbortController();
    const running = loop.run(stop.signal, Date.now() + 60000, () => undefined).catch((e: unknown) => e);
    cleanups.push(async () => {
      stop.abort();
      await running;
      await reader.disconnect();
    });
    // Everything in the topic so far, from offset 0.
    const end = (await stack.topics.endOffsets(topic)).get(0)!;
    await waitFor('c caught up', () => to('c').length === 2 * end, { timeoutMs: 60000 });
    await committed(c, end);
    const stickyCall = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${sticky.url}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    expect((await stickyCall('GET', `/subscriptions/${c}/offsets`)).body).toMatchObject({
      topology: 'LOCAL_STICKY_PULL',
      partitions: [0, 1].map((partition) => ({
        partition,
        committed: end,
        end,
        lag: 0,
        owner: instanceId,
        epoch: run,
      })),
    });
    const seek = await stickyCall('POST', `/subscriptions/${c}/offsets/seek`, {
      offsets: [{ partition: 0, offset: end - 2 }],
    });
    expect(seek).toMatchObject({ status: 200, body: { partitions: [{ partition: 0, from: end, to: end - 2 }] } });
    await waitFor('the last two events of partition 0 again at c', () => to('c').length === 2 * end + 2, {
      timeoutMs: 60000,
    });
    await committed(c, end);
  }, 300000);
});
