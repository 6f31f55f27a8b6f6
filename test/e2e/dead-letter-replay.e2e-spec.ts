import { randomUUID } from 'node:crypto';
import type { Client as TemporalClient } from '@temporalio/client';
import { dispatchWorkflowIdOf, dlqReplayWorkflowIdOf } from '@libs/temporal';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { ReceivedRequest, WebhookReceiver } from '../support/webhook-receiver';

/**
 * A dead-letter replay survives the death of the instance running it: 50 events dead-lettered through a sink
 * answering 500, the sink fixed, a replay started, and the instance process SIGKILLed while the sink holds one
 * replayed event unanswered. The restarted instance's worker takes the replay's batch over (after its heartbeat
 * timeout) and finishes it: every event is acknowledged by the sink exactly once, none lost, none doubled.
 */
describe('dead-letter replay across an instance crash', () => {
  const topic = uniqueTopic('dlq-crash');
  const instanceId = `dlq-crash-${randomUUID().slice(0, 6)}`;
  const receiver = new WebhookReceiver();
  const running: InstanceProcess[] = [];
  let temporal: { client: TemporalClient; close(): Promise<void> };
  let replayId: string | undefined;
  let release: () => void = () => undefined;

  const start = async () => {
    const instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      EVENTMESH_KAFKA_TOPICS: topic,
      // 8 partitions, a key per event: a partition's events are dead-lettered one after another (ordered delivery,
      // each second attempt about half a second after the first), so the 50 letters are written sooner.
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '8',
      EVENTMESH_DELIVERY_MAX_ATTEMPTS: '2',
      EVENTMESH_DELIVERY_RETRY_INITIAL_MS: '10',
      EVENTMESH_DELIVERY_RETRY_MAX_MS: '20',
      EVENTMESH_DELIVERY_BREAKER_FAILURE_THRESHOLD: '100000',
      // The replay batch's heartbeat timeout: how soon the restarted worker takes a dead instance's batch over.
      EVENTMESH_DELIVERY_LEASE_TTL_MS: '3000',
    });
    running.push(instance);
    await instance.ready();
    return instance;
  };

  beforeAll(async () => {
    temporal = await temporalClient();
    await receiver.start();
  });

  afterAll(async () => {
    release();
    await Promise.all(running.map((i) => i.stop()));
    await terminateWorkflows(temporal.client, [
      dispatchWorkflowIdOf(instanceId),
      ...(replayId ? [dlqReplayWorkflowIdOf(replayId)] : []),
    ]);
    await temporal.close();
    await receiver.stop();
  });

  it('completes the replay after a SIGKILL and a restart, each event acknowledged once', async () => {
    receiver.status = () => 500;
    let instance = await start();
    const api = instance.url!;
    const created = await fetch(`${api}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ topic, sink: receiver.url }),
    });
    expect(created.status).toBe(201);
    const subscriptionId = ((await created.json()) as { id: string }).id;
    const published = new Set<string>();
    for (let n = 0; n < 50; n++) {
      const response = await fetch(`${api}/events/publish?topic=${topic}`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({
          specversion: '1.0',
          id: `c-${n}`,
          source: '/crash',
          type: 'crash.n',
          partitionkey: `k${n}`,
        }),
      });
      expect(response.status).toBe(202);
      published.add(`c-${n}`);
    }
    const deadLetters = async (base: string) =>
      (
        (await (await fetch(`${base}/subscriptions/${subscriptionId}/dead-letters?limit=100`)).json()) as {
          items: unknown[];
        }
      ).items.length;
    await waitFor('50 dead letters', async () => (await deadLetters(api)) === 50, {
      timeoutMs: 60000,
      intervalMs: 250,
    });

    // The sink is fixed, but holds the 20th replayed event unanswered: the instance dies while it waits.
    receiver.status = () => 200;
    const replayFrom = receiver.requests.length;
    let held: ReceivedRequest | undefined;
    const holding = new Promise<void>((resolve) => (release = resolve));
    receiver.gate = (request) => {
      if (held || receiver.requests.length - replayFrom !== 20) return undefined;
      held = request;
      return holding;
    };
    const started = await fetch(`${api}/subscriptions/${subscriptionId}/dead-letters/replays`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ filter: {}, ratePerSecond: 20 }),
    });
    expect(started.status).toBe(202);
    replayId = ((await started.json()) as { replayId: string }).replayId;
    await waitFor('the sink to hold the 20th replayed event', () => held !== undefined);

    instance.child.kill('SIGKILL');
    expect((await instance.exit(60000)).signal).toBe('SIGKILL');
    instance = await start();

    const progress = await waitFor(
      'the replay to complete on the restarted instance',
      async () => {
        const response = await fetch(
          `${instance.url}/subscriptions/${subscriptionId}/dead-letters/replays/${replayId}`,
        );
        const body = (await response.json()) as { state: string; replayed: number; failed: number; remaining: number };
        return body.state === 'COMPLETED' ? body : undefined;
      },
      { timeoutMs: 60000, intervalMs: 250 },
    );

    // Acknowledged by the sink: every replay request but the one held when the instance died.
    const acknowledged = receiver.requests
      .slice(replayFrom)
      .filter((r) => r !== held)
      .map((r) => String(r.headers['ce-id']));
    const times = new Map<string, number>();
    for (const id of acknowledged) times.set(id, (times.get(id) ?? 0) + 1);
    expect([...published].filter((id) => times.get(id) !== 1)).toEqual([]);
    expect(acknowledged).toHaveLength(50);
    // The held one was sent again by the restarted instance (it was never acknowledged, so never marked).
    expect(times.get(String(held!.headers['ce-id']))).toBe(1);
    expect(progress).toMatchObject({ replayed: 50, failed: 0, remaining: 0 });
    expect(await deadLetters(instance.url!)).toBe(0);
  }, 240000);
});
