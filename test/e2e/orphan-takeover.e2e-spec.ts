import { randomUUID } from 'node:crypto';
import type { Client as TemporalClient } from '@temporalio/client';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/**
 * An orphaned subscription in LOCAL_STICKY_PULL, with real instance processes: A creates a webhook subscription,
 * A is killed with SIGKILL and never returns, and B takes the subscription over after the grace and delivers
 * every event a publisher was answered 202 for, before and after A died.
 */
describe('orphan takeover in LOCAL_STICKY_PULL', () => {
  const topic = uniqueTopic('orphans');
  const suffix = randomUUID().slice(0, 6);
  const ids = { a: `orphan-a-${suffix}`, b: `orphan-b-${suffix}` };
  const GRACE_MS = 6000;
  const running: InstanceProcess[] = [];
  let temporal: { client: TemporalClient; close(): Promise<void> };

  const start = async (instanceId: string) => {
    const instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '3',
      EVENTMESH_DELIVERY_LEASE_TTL_MS: '3000',
      EVENTMESH_DELIVERY_ORPHAN_GRACE_MS: String(GRACE_MS),
    });
    running.push(instance);
    await instance.ready();
    return instance;
  };

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
          source: '/orphans',
          type: 'orphan.n',
          partitionkey: `k${n % 7}`,
        }),
      }).catch(() => undefined);
      if (response?.status === 202) acknowledged.push(id);
    }
    return acknowledged;
  };

  beforeAll(async () => {
    temporal = await temporalClient();
  });

  /** The case's webhook sink, stopped after it whatever happened (a sink left listening keeps jest from exiting). */
  let sink: WebhookReceiver | undefined;

  afterAll(async () => {
    await sink?.stop();
    await Promise.all(running.map((i) => i.stop()));
    await terminateWorkflows(temporal.client, Object.values(ids).map(dispatchWorkflowIdOf));
    await temporal.close();
  });

  it('moves the subscription of a SIGKILLed instance to a survivor after the grace, losing no acknowledged event', async () => {
    const [a, b] = [await start(ids.a), await start(ids.b)];
    const receiver = (sink = new WebhookReceiver());
    // A sink slower than the publisher, which from its 21st request on answers nothing until A is dead: A dies with a
    // backlog however fast the host (a CI run once saw A deliver all 150 before the kill, with the delay alone).
    receiver.delayMs = 20;
    let answerHeld: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (answerHeld = resolve));
    receiver.gate = () => (receiver.requests.length > 20 ? held : undefined);
    const created = await fetch(`${a.url}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sink: await receiver.start(), topic }),
    });
    expect(created.status).toBe(201);
    const subscription = (await created.json()) as { id: string; instance: string };
    expect(subscription.instance).toBe(ids.a);
    const delivered = () => new Set(receiver.requests.map((r) => String(r.headers['ce-id'])));

    const before = await publish(b.url!, 150, 'before');
    expect(before).toHaveLength(150);
    await waitFor('A to deliver some of them', () => delivered().size >= 20);
    a.child.kill('SIGKILL');
    expect((await a.exit(60000)).signal).toBe('SIGKILL');
    const killedAt = Date.now();
    const deliveredByA = delivered().size;
    expect(deliveredByA).toBeLessThan(before.length);
    receiver.gate = undefined;
    answerHeld();
    const after = await publish(b.url!, 50, 'after');
    expect(after).toHaveLength(50);

    // B sees the orphan and takes it over, fencing A's dispatch run.
    const moved = await waitFor(
      'B to take the subscription over',
      async () => {
        const s = (await (await fetch(`${b.url}/subscriptions/${subscription.id}`)).json()) as { instance: string };
        return s.instance === ids.b && Date.now();
      },
      { timeoutMs: GRACE_MS + 30000, intervalMs: 200 },
    );
    expect(b.stdout).toContain('orphaned subscription: its instance has no live dispatch run');
    const takeover = b.stdout.split('\n').find((line) => line.includes('took over an orphaned subscription'));
    expect(takeover).toBeDefined();
    expect(JSON.parse(takeover!)).toMatchObject({
      subscription: subscription.id,
      from: ids.a,
      to: ids.b,
      epoch: expect.any(Number),
    });
    const orphans = (await (await fetch(`${b.url}/admin/subscriptions/orphans`)).json()) as {
      orphans: { subscription: string }[];
    };
    expect(orphans.orphans.map((o) => o.subscription)).not.toContain(subscription.id);

    const acknowledged = [...before, ...after];
    await waitFor('every acknowledged event to be delivered', () => acknowledged.every((id) => delivered().has(id)), {
      timeoutMs: 60000,
    });
    const lost = acknowledged.filter((id) => !delivered().has(id));
    expect(lost).toEqual([]);
    const received = receiver.requests.length;
    const distinct = delivered().size;
    expect(distinct).toBe(acknowledged.length);
    process.stdout.write(
      `orphan takeover: ${acknowledged.length} acknowledged (${before.length} before SIGKILL, ${after.length} after), ` +
        `${deliveredByA} delivered by A, moved to B ${moved - killedAt} ms after the kill (grace ${GRACE_MS} ms), ` +
        `${distinct} distinct delivered, ${lost.length} lost, ${received - distinct} duplicates\n`,
    );
  }, 240000);
});
