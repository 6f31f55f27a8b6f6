import { randomUUID } from 'node:crypto';
import type { Client as TemporalClient } from '@temporalio/client';
import { Client as PgClient } from 'pg';
import { Client } from 'undici';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { dispatchStatusQuery, pauseDispatchSignal } from '../../workflows';
import { testConfig, uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/**
 * Several real instance processes in LOCAL_STICKY_PULL on one topic: each serves its own subscribers, and an
 * instance killed with SIGKILL in the middle of a stream resumes from the offsets in Postgres after a restart,
 * with every event a publisher was answered 202 for delivered at least once.
 */
describe('instances in LOCAL_STICKY_PULL', () => {
  const topic = uniqueTopic('sticky');
  const ids = {
    x: `x-${randomUUID().slice(0, 6)}`,
    y: `y-${randomUUID().slice(0, 6)}`,
    pub: `pub-${randomUUID().slice(0, 6)}`,
  };
  const running: InstanceProcess[] = [];
  let temporal: { client: TemporalClient; close(): Promise<void> };

  const spawn = (instanceId: string, roles: string, overrides: Record<string, string> = {}) => {
    const instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      EVENTMESH_INSTANCE_ROLES: roles,
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '3',
      EVENTMESH_DELIVERY_LEASE_TTL_MS: '6000',
      ...overrides,
    });
    running.push(instance);
    return instance;
  };
  const start = async (instanceId: string, roles = 'gateway,worker', overrides: Record<string, string> = {}) => {
    const instance = spawn(instanceId, roles, overrides);
    await instance.ready();
    return instance;
  };

  /** Each subscription on a new connection, so a gateway of several processes takes them in turn. */
  const subscribe = async (api: string, sink: string) => {
    const response = await fetch(`${api}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ sink, topic }),
    });
    expect(response.status).toBe(201);
    return (await response.json()) as { id: string; instance: string };
  };

  /** Where Kafka wrote each acknowledged event, by id. */
  const receipts = new Map<string, { partition: number; offset: number }>();
  /** Publishes `count` events one after another; resolves with the ids Kafka acknowledged (202). */
  const publish = async (api: string, count: number, prefix: string): Promise<string[]> => {
    const acknowledged: string[] = [];
    for (let n = 0; n < count; n++) {
      const id = `${prefix}-${n}`;
      const response = await fetch(`${api}/events/publish?topic=${topic}`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({
          specversion: '1.0',
          id,
          source: '/sticky',
          type: 'sticky.n',
          partitionkey: `k${n % 5}`,
        }),
      }).catch(() => undefined);
      if (response?.status === 202) {
        acknowledged.push(id);
        receipts.set(id, (await response.json()) as { partition: number; offset: number });
      }
    }
    return acknowledged;
  };

  const idsAt = (receiver: WebhookReceiver) => new Set(receiver.requests.map((r) => String(r.headers['ce-id'])));

  beforeAll(async () => {
    temporal = await temporalClient();
  });

  afterAll(async () => {
    await Promise.all(running.map((i) => i.stop()));
    await terminateWorkflows(
      temporal.client,
      [...Object.values(ids), `${ids.x}-crash`, `${ids.x}-tier`].map(dispatchWorkflowIdOf),
    );
    await temporal.close();
  });

  it('lets each instance serve its own subscribers, and keeps the others going when one stops', async () => {
    const [x, y] = await Promise.all([start(ids.x), start(ids.y)]);
    const atX = new WebhookReceiver();
    const atY = new WebhookReceiver();
    const subX = await subscribe(x.url!, await atX.start());
    const subY = await subscribe(y.url!, await atY.start());
    expect([subX.instance, subY.instance]).toEqual([ids.x, ids.y]);
    for (const id of [ids.x, ids.y]) {
      expect((await temporal.client.workflow.getHandle(dispatchWorkflowIdOf(id)).describe()).status.name).toBe(
        'RUNNING',
      );
    }

    const first = await publish(x.url!, 20, 'both');
    expect(first).toHaveLength(20);
    await waitFor('both subscribers to get all 20', () =>
      first.every((id) => idsAt(atX).has(id) && idsAt(atY).has(id)),
    );

    // Y stops: its subscriber waits (its subscription is pinned to Y), X's goes on.
    expect((await y.stop()).code).toBe(0);
    const second = await publish(x.url!, 10, 'while-y-is-down');
    expect(second).toHaveLength(10);
    await waitFor('X to deliver while Y is down', () => second.every((id) => idsAt(atX).has(id)));
    expect(second.filter((id) => idsAt(atY).has(id))).toEqual([]);

    // Y comes back with the same id and delivers the backlog from its committed offsets.
    await start(ids.y);
    await waitFor('Y to deliver its backlog', () => second.every((id) => idsAt(atY).has(id)), { timeoutMs: 30000 });
    await Promise.all([atX.stop(), atY.stop()]);
  });

  it('dispatches, by the worker of the same instance id, what a gateway of two processes took', async () => {
    const id = `${ids.x}-tier`;
    const gateway = await start(id, 'gateway', { EVENTMESH_HTTP_PROCESSES: '2' });
    const worker = spawn(id, 'worker');
    await waitFor(
      'the worker to run its dispatch workflow',
      async () => {
        const description = await temporal.client.workflow
          .getHandle(dispatchWorkflowIdOf(id))
          .describe()
          .catch(() => undefined);
        return description?.status.name === 'RUNNING';
      },
      { timeoutMs: 60000 },
    );
    const [atA, atB] = [new WebhookReceiver(), new WebhookReceiver()];
    /** A subscription made over one new connection, and the gateway process that made it (its /health pid). */
    const subscribeVia = async (sink: string) => {
      const client = new Client(gateway.url!);
      try {
        const health = (await (await client.request({ path: '/health', method: 'GET' })).body.json()) as {
          pid: number;
        };
        const created = await client.request({
          path: '/subscriptions',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ sink, topic }),
        });
        expect(created.statusCode).toBe(201);
        return { pid: health.pid, ...((await created.body.json()) as { id: string; instance: string }) };
      } finally {
        await client.close();
      }
    };
    const first = await subscribeVia(await atA.start());
    const sinkB = await atB.start();
    // New connections go to the processes in turn; one made by the other process is what this test needs.
    const second = await waitFor('a subscription made by the other gateway process', async () => {
      const made = await subscribeVia(sinkB);
      if (made.pid !== first.pid) return made;
      expect((await fetch(`${gateway.url}/subscriptions/${made.id}`, { method: 'DELETE' })).status).toBe(204);
      return undefined;
    });
    expect([first.instance, second.instance]).toEqual([id, id]);
    const published = await publish(gateway.url!, 20, 'tier');
    expect(published).toHaveLength(20);
    await waitFor(
      'both subscribers to get all 20 from the worker',
      () => published.every((e) => idsAt(atA).has(e) && idsAt(atB).has(e)),
      {
        timeoutMs: 30000,
      },
    );
    // Stopped here, so the tests after this one do not share the host with three more processes.
    expect((await gateway.stop()).code).toBe(0);
    expect((await worker.stop()).code).toBe(0);
    await Promise.all([atA.stop(), atB.stop()]);
  });

  // After a crash too: the restarted process reads the old run at once (a sticky queue held that read for the
  // dead worker until the sticky timeout, past the read's deadline, and the old run was kept).
  it.each(['SIGTERM', 'SIGKILL'] as const)(
    "keeps an operator's pause of the dispatch workflow across a restart of the instance after %s",
    async (signal) => {
      const id = `${ids.x}-pause-${signal}`;
      const first = await start(id);
      const handle = temporal.client.workflow.getHandle(dispatchWorkflowIdOf(id));
      await handle.signal(pauseDispatchSignal, true);
      await waitFor('the pause to be seen', async () => (await handle.query(dispatchStatusQuery)).paused);
      const runBefore = (await handle.describe()).runId;
      if (signal === 'SIGTERM') expect((await first.stop()).code).toBe(0);
      else {
        first.child.kill('SIGKILL');
        expect((await first.exit(60000)).signal).toBe('SIGKILL');
      }

      await start(id);
      const after = temporal.client.workflow.getHandle(dispatchWorkflowIdOf(id));
      const description = await after.describe();
      expect(description.runId).not.toBe(runBefore);
      expect((await after.query(dispatchStatusQuery)).paused).toBe(true);
      await after.signal(pauseDispatchSignal, false);
      await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(id)]);
    },
    180000,
  );

  it('loses no acknowledged event when an instance is killed with SIGKILL mid-stream and restarted', async () => {
    const worker = await start(`${ids.x}-crash`);
    const publisher = await start(ids.pub, 'gateway');
    const receiver = new WebhookReceiver();
    // A sink slower than the publisher, so a backlog is in flight when the instance dies.
    receiver.delayMs = 10;
    const subscription = await subscribe(worker.url!, await receiver.start());

    const pg = new PgClient(testConfig().postgres);
    await pg.connect();
    // A failure must not leave the sink or the client open: jest would not exit.
    try {
      const committedOffsets = async () => {
        const { rows } = await pg.query(
          'SELECT partition, next_offset FROM subscription_offsets WHERE subscription_id = $1 AND topic = $2',
          [subscription.id, topic],
        );
        return new Map(
          (rows as { partition: number; next_offset: string }[]).map((r) => [r.partition, Number(r.next_offset)]),
        );
      };
      const createdAt = await committedOffsets();

      const publishing = publish(publisher.url!, 300, 'crash');
      await waitFor('a third of the stream to be delivered', () => idsAt(receiver).size >= 100);
      // And some of it committed (offsets are committed a few times a second, not per event): the kill then lands
      // between a commit and the next, where what was delivered since may come again and nothing before it may.
      await waitFor('a commit past some delivered events', async () =>
        [...(await committedOffsets())].some(([partition, next]) => next > (createdAt.get(partition) ?? Infinity)),
      );
      worker.child.kill('SIGKILL');
      const killed = await worker.exit(60000);
      expect(killed.signal).toBe('SIGKILL');
      const deliveredBeforeKill = idsAt(receiver).size;
      expect(deliveredBeforeKill).toBeLessThan(300);
      // What the killed instance had committed: the restart resumes there, and redelivers nothing before it.
      const committedAtKill = await committedOffsets();

      await start(`${ids.x}-crash`);
      const acknowledged = await publishing;
      expect(acknowledged).toHaveLength(300);
      await waitFor(
        'every acknowledged event to be delivered',
        () => acknowledged.every((id) => idsAt(receiver).has(id)),
        {
          timeoutMs: 60000,
        },
      );
      const received = receiver.requests.length;
      const distinct = idsAt(receiver).size;
      expect(distinct).toBe(300);
      // Redelivery after the crash is allowed (at least once), only of what was not committed; it is reported.
      const countOf = new Map<string, number>();
      for (const r of receiver.requests)
        countOf.set(String(r.headers['ce-id']), (countOf.get(String(r.headers['ce-id'])) ?? 0) + 1);
      const committedBefore = acknowledged.filter(
        (id) => receipts.get(id)!.offset < (committedAtKill.get(receipts.get(id)!.partition) ?? 0),
      );
      process.stdout.write(
        `crash test: ${deliveredBeforeKill} delivered before SIGKILL, ${committedBefore.length} committed, 300 acknowledged, ` +
          `${distinct} distinct delivered, ${received - distinct} duplicates\n`,
      );
      expect(committedBefore.length).toBeGreaterThan(0);
      expect(committedBefore.filter((id) => countOf.get(id) !== 1)).toEqual([]);
    } finally {
      await pg.end();
      await receiver.stop();
    }
  }, 240000);
});
