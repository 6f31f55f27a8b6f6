import { randomUUID } from 'node:crypto';
import { Client as PgClient } from 'pg';
import type { Client } from '@temporalio/client';
import { Kafka, PartitionerArgs, Partitioners } from 'kafkajs';
import { Webhook } from 'standardwebhooks';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { testConfig, uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { topicEndOffset } from '../support/topic-offsets';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/**
 * The first slice end to end, as a user sees it: a real instance process on the real servers, a subscription
 * with a webhook sink created through the API, an event published over HTTP, delivered by the poll-and-dispatch
 * activity of the instance's dispatch workflow, and its offset committed in Postgres after the webhook's 2xx.
 */
describe('first event, end to end', () => {
  const config = testConfig();
  const instanceId = `e2e-${randomUUID().slice(0, 8)}`;
  const topic = uniqueTopic('e2e');
  const receiver = new WebhookReceiver();
  let instance: InstanceProcess;
  let api: string;
  let sink: string;
  let temporal: { client: Client; close(): Promise<void> };
  let pg: PgClient;
  let kafka: Kafka;
  /** The subscription the first delivery test creates; later tests reuse it. */
  let mainSubscriptionId: string;

  beforeAll(async () => {
    sink = await receiver.start();
    instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '3',
      EVENTMESH_DELIVERY_LEASE_TTL_MS: '6000',
    });
    api = await instance.ready();
    temporal = await temporalClient();
    pg = new PgClient({ ...config.postgres, user: config.postgres.user });
    await pg.connect();
    kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'e2e-check', logLevel: 0 });
  });

  afterAll(async () => {
    const exit = await instance?.stop();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await temporal?.close();
    await pg?.end();
    await receiver.stop();
    expect(exit?.code).toBe(0);
  });

  const endOffsets = () => topicEndOffset(kafka, topic);

  it('reports every dependency up on /health', async () => {
    const response = await fetch(`${api}/health`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, Record<string, Record<string, unknown>>>;
    expect(body.dependencies.postgres.status).toBe('up');
    expect(body.dependencies.kafka.status).toBe('up');
    expect(body.dependencies.temporal.status).toBe('up');
  });

  it('delivers a published event to a webhook subscription and commits its offset after the 2xx', async () => {
    const created = await fetch(`${api}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sink, topic }),
    });
    expect(created.status).toBe(201);
    const subscription = (await created.json()) as { id: string; instance: string; secret: string };
    expect(subscription.instance).toBe(instanceId);
    expect(subscription.secret).toMatch(/^whsec_/);
    mainSubscriptionId = subscription.id;
    expect(receiver.handshakes).toHaveLength(1);
    expect(receiver.handshakes[0]['webhook-request-origin']).toBe('eventmesh');
    const fetched = (await (await fetch(`${api}/subscriptions/${subscription.id}`)).json()) as Record<string, unknown>;
    expect(fetched.secret).toBeUndefined();

    const eventId = randomUUID();
    const published = await fetch(`${api}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({
        specversion: '1.0',
        id: eventId,
        source: '/e2e',
        type: 'e2e.created',
        subject: 'first',
        data: { n: 1 },
      }),
    });
    expect(published.status).toBe(202);
    const receipt = (await published.json()) as { id: string; topic: string; partition: number; offset: number };
    expect(receipt).toMatchObject({ id: eventId, topic });

    const delivery = await waitFor('the webhook to receive the event', () =>
      receiver.requests.find((r) => r.headers['ce-id'] === eventId),
    );
    expect(delivery.method).toBe('POST');
    expect(delivery.headers).toMatchObject({
      'ce-specversion': '1.0',
      'ce-source': '/e2e',
      'ce-type': 'e2e.created',
      'ce-subject': 'first',
      'content-type': 'application/json',
    });
    expect(JSON.parse(delivery.body.toString())).toEqual({ n: 1 });
    // Signed with the Standard Webhooks scheme: the official verifier accepts it with the subscription's secret.
    const signed = {
      'webhook-id': String(delivery.headers['webhook-id']),
      'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
      'webhook-signature': String(delivery.headers['webhook-signature']),
    };
    expect(() => new Webhook(subscription.secret).verify(delivery.body, signed)).not.toThrow();
    expect(() =>
      new Webhook(`whsec_${Buffer.from('another secret').toString('base64')}`).verify(delivery.body, signed),
    ).toThrow();

    const committed = await waitFor('the offset commit in Postgres', async () => {
      const { rows } = await pg.query(
        'SELECT next_offset FROM subscription_offsets WHERE subscription_id = $1 AND topic = $2 AND partition = $3',
        [subscription.id, topic, receipt.partition],
      );
      return rows.length === 1 && Number(rows[0].next_offset) === receipt.offset + 1
        ? Number(rows[0].next_offset)
        : undefined;
    });
    expect(committed).toBe(receipt.offset + 1);
    expect(receiver.requests.filter((r) => r.headers['ce-id'] === eventId)).toHaveLength(1);
  });

  it('commits the offset only after the webhook acknowledged the event', async () => {
    const subscriptionId = mainSubscriptionId;
    const offsetOf = async (partition: number): Promise<number | undefined> => {
      const { rows } = await pg.query(
        'SELECT next_offset FROM subscription_offsets WHERE subscription_id = $1 AND topic = $2 AND partition = $3',
        [subscriptionId, topic, partition],
      );
      return rows.length === 1 ? Number(rows[0].next_offset) : undefined;
    };
    const publish = async (id: string, partitionkey: string) => {
      const response = await fetch(`${api}/events/publish?topic=${topic}`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({ specversion: '1.0', id, source: '/e2e', type: 'e2e.held', partitionkey }),
      });
      expect(response.status).toBe(202);
      return (await response.json()) as { partition: number; offset: number };
    };
    // The sink holds its answer to this one event; it answers every other at once.
    const heldId = randomUUID();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    receiver.gate = (request) => (request.headers['ce-id'] === heldId ? released : undefined);
    const samples: number[] = [];
    let sampling = true;
    let sampler: Promise<void> | undefined;
    try {
      const held = await publish(heldId, 'held');
      await waitFor('the sink to hold the event', () => receiver.requests.some((r) => r.headers['ce-id'] === heldId));
      // From now until the answer is released, the committed offset of the held event's partition is sampled
      // again and again: it must never pass the held event.
      sampler = (async () => {
        while (sampling) {
          samples.push((await offsetOf(held.partition)) ?? -1);
          await new Promise((r) => setTimeout(r, 10));
        }
      })();
      // An event of another partition of the same subscription, delivered and committed while the first is held:
      // the loop ran a commit after the held event was sent, and that commit covers every lane that moved.
      const partitioner = Partitioners.DefaultPartitioner();
      const partitionMetadata = [0, 1, 2].map((partitionId) => ({ partitionId, leader: 0 }));
      const probeKey = Array.from({ length: 100 }, (_, k) => `probe-${k}`).find(
        (key) =>
          partitioner({ topic, partitionMetadata, message: { key, value: null } } as PartitionerArgs) !==
          held.partition,
      )!;
      const probe = await publish(randomUUID(), probeKey);
      expect(probe.partition).not.toBe(held.partition);
      await waitFor(
        'the commit of an event of another partition',
        async () => (await offsetOf(probe.partition)) === probe.offset + 1,
      );
      samples.push((await offsetOf(held.partition)) ?? -1);
      sampling = false;
      await sampler;
      expect(samples.length).toBeGreaterThan(1);
      expect(samples.filter((offset) => offset > held.offset)).toEqual([]);
      release();
      expect(
        await waitFor('the commit after the answer', async () => (await offsetOf(held.partition)) === held.offset + 1),
      ).toBe(true);
    } finally {
      sampling = false;
      await sampler;
      receiver.gate = undefined;
      release();
    }
  });

  it('retries a failing webhook, then dead-letters the event, while a healthy subscription gets it at once', async () => {
    const failing = new WebhookReceiver();
    failing.status = () => 500;
    const failingUrl = await failing.start();
    try {
      const created = await fetch(`${api}/subscriptions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          sink: failingUrl,
          topic,
          config: { retry: { maxAttempts: 4, initialDelayMs: 10, maxDelayMs: 20 } },
        }),
      });
      expect(created.status).toBe(201);
      const { id: failingId } = (await created.json()) as { id: string };
      const eventId = randomUUID();
      await fetch(`${api}/events/publish?topic=${topic}`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({ specversion: '1.0', id: eventId, source: '/e2e', type: 'e2e.doomed', data: 'x' }),
      });
      await waitFor('the healthy subscription to get the event', () =>
        receiver.requests.some((r) => r.headers['ce-id'] === eventId),
      );
      const letter = await waitFor(
        'the dead letter',
        async () => {
          const { rows } = await pg.query(
            'SELECT event_id, attempts, last_error FROM dead_letters WHERE subscription_id = $1',
            [failingId],
          );
          return rows[0] as { event_id: string; attempts: number; last_error: string } | undefined;
        },
        { timeoutMs: 30000 },
      );
      expect(letter).toEqual({ event_id: eventId, attempts: 4, last_error: 'HTTP 500' });
      expect(failing.requests.filter((r) => r.headers['ce-id'] === eventId)).toHaveLength(4);
      const { rows: parked } = await pg.query(
        'SELECT count(*)::int AS n FROM delivery_retries WHERE subscription_id = $1',
        [failingId],
      );
      expect(parked[0].n).toBe(0);
      const { items: listed, next } = (await (
        await fetch(`${api}/subscriptions/${failingId}/dead-letters`)
      ).json()) as { items: Record<string, unknown>[]; next: string | null };
      expect([listed.length, next]).toEqual([1, null]);
      expect(listed[0]).toMatchObject({ eventId, attempts: 4, lastError: 'HTTP 500', replayedAt: null });
      // The event's own attributes only: the publishing request's id is the runtime's, not an attribute.
      expect(Object.keys(listed[0].attributes as object).sort()).toEqual([
        'datacontenttype',
        'id',
        'source',
        'specversion',
        'type',
      ]);
      const read = (await (
        await fetch(`${api}/subscriptions/${failingId}/dead-letters/${String(listed[0].id)}`)
      ).json()) as Record<string, unknown>;
      expect(read).toMatchObject({ eventId, event: { id: eventId, type: 'e2e.doomed', source: '/e2e', data: 'x' } });
      await fetch(`${api}/subscriptions/${failingId}`, { method: 'DELETE' });
    } finally {
      await failing.stop();
    }
  });

  it('runs delivery in the dispatch workflow, whose activity heartbeats its progress', async () => {
    const handle = temporal.client.workflow.getHandle(dispatchWorkflowIdOf(instanceId));
    const description = await handle.describe();
    expect(description.status.name).toBe('RUNNING');
    expect(description.taskQueue).toBe(`eventmesh-${instanceId}`);
    const details = await waitFor('a heartbeat that counts the delivery', async () => {
      const raw = await handle.describe();
      const pending = raw.raw.pendingActivities ?? [];
      const activity = pending.find((a) => a.activityType?.name === 'pollAndDispatch');
      const payload = activity?.heartbeatDetails?.payloads?.[0]?.data;
      if (!payload) return undefined;
      const progress = JSON.parse(Buffer.from(payload).toString()) as { delivered: number; subscriptions: number };
      return progress.delivered >= 1 ? progress : undefined;
    });
    expect(details.subscriptions).toBeGreaterThanOrEqual(1);
  });

  it('lists the dispatch workflow in the Temporal Web UI', async () => {
    const query = encodeURIComponent(`WorkflowId="${dispatchWorkflowIdOf(instanceId)}"`);
    const response = await fetch(
      `${config.temporal.uiUrl}/api/v1/namespaces/${config.temporal.namespace}/workflows?query=${query}`,
    );
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      executions: { execution: { workflowId: string }; status: string; type: { name: string } }[];
    };
    expect(body.executions[0]).toMatchObject({
      execution: { workflowId: dispatchWorkflowIdOf(instanceId) },
      status: 'WORKFLOW_EXECUTION_STATUS_RUNNING',
      type: { name: 'instanceDispatchWorkflow' },
    });
    const page = await fetch(`${config.temporal.uiUrl}/namespaces/${config.temporal.namespace}/workflows`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<!doctype html>');
  });

  it('delivers to a filtered subscription only the events its filters match', async () => {
    const picky = new WebhookReceiver();
    const url = await picky.start();
    try {
      const bad = await fetch(`${api}/subscriptions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sink: url, topic, filters: [{ sql: "type LIKE 'e2e.%' AND" }] }),
      });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ code: 'INVALID_REQUEST', field: 'filters', path: 'filters[0].sql' });

      const created = await fetch(`${api}/subscriptions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sink: url, topic, filters: [{ sql: "type LIKE 'e2e.keep%' AND EXISTS tenant" }] }),
      });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const publish = (type: string, extra: Record<string, string> = {}) =>
        fetch(`${api}/events/publish?topic=${topic}`, {
          method: 'POST',
          headers: { 'content-type': 'application/cloudevents+json' },
          body: JSON.stringify({
            specversion: '1.0',
            id: randomUUID(),
            source: '/e2e',
            type,
            partitionkey: 'one-lane',
            ...extra,
          }),
        });
      // Same partition key, so one lane sees them in this order: by the time the last arrives, the others were judged.
      await publish('e2e.drop', { tenant: 'a' });
      await publish('e2e.keep.1');
      await publish('e2e.keep.2', { tenant: 'a' });
      await waitFor('the matching event', () => picky.requests.some((r) => r.headers['ce-type'] === 'e2e.keep.2'));
      expect(picky.requests.map((r) => r.headers['ce-type'])).toEqual(['e2e.keep.2']);
      await fetch(`${api}/subscriptions/${id}`, { method: 'DELETE' });
    } finally {
      await picky.stop();
    }
  });

  it('replaces a subscription with PUT and keeps the aliases /events/subscribe and /events/unsubscribe', async () => {
    const json = { 'content-type': 'application/json' };
    const created = await fetch(`${api}/events/subscribe`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ sink, topic }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };

    const replaced = await fetch(`${api}/subscriptions/${id}`, {
      method: 'PUT',
      headers: json,
      body: JSON.stringify({ sink, filters: [{ prefix: { type: 'e2e.' } }], config: { retry: { maxAttempts: 3 } } }),
    });
    expect(replaced.status).toBe(200);
    expect(await replaced.json()).toMatchObject({
      id,
      topic,
      filters: [{ prefix: { type: 'e2e.' } }],
      config: { startFrom: 'latest', retry: { maxAttempts: 3 } },
    });

    const moved = await fetch(`${api}/subscriptions/${id}`, {
      method: 'PUT',
      headers: json,
      body: JSON.stringify({ sink, topic: 'elsewhere' }),
    });
    // A subscription never moves to another topic, whether that topic exists or not: the field is named.
    expect(moved.status).toBe(400);
    expect(await moved.json()).toMatchObject({ code: 'INVALID_REQUEST', field: 'topic' });
    const restarted = await fetch(`${api}/subscriptions/${id}`, {
      method: 'PUT',
      headers: json,
      body: JSON.stringify({ sink, config: { startFrom: 'earliest' } }),
    });
    expect(restarted.status).toBe(400);
    expect(await restarted.json()).toMatchObject({ code: 'INVALID_REQUEST', field: 'config.startFrom' });

    expect((await fetch(`${api}/events/unsubscribe`, { method: 'POST', headers: json, body: '{}' })).status).toBe(400);
    expect(
      (await fetch(`${api}/events/unsubscribe`, { method: 'POST', headers: json, body: JSON.stringify({ id }) }))
        .status,
    ).toBe(204);
    expect((await fetch(`${api}/subscriptions/${id}`)).status).toBe(404);
  });

  it('refuses a webhook that does not answer the validation handshake, and creates nothing', async () => {
    const before = ((await (await fetch(`${api}/subscriptions`)).json()) as unknown[]).length;
    const refusing = new WebhookReceiver();
    refusing.allowedOrigin = undefined;
    const url = await refusing.start();
    try {
      const response = await fetch(`${api}/subscriptions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sink: url, topic }),
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ code: 'WEBHOOK_VALIDATION_FAILED', sink: url, status: 200 });
      expect(((await (await fetch(`${api}/subscriptions`)).json()) as unknown[]).length).toBe(before);

      const trusted = await fetch(`${api}/subscriptions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sink: url, topic, config: { trusted: true } }),
      });
      expect(trusted.status).toBe(201);
      expect(refusing.handshakes).toHaveLength(1);
      await fetch(`${api}/subscriptions/${((await trusted.json()) as { id: string }).id}`, { method: 'DELETE' });
    } finally {
      await refusing.stop();
    }
  });

  it.each([
    ['id', { specversion: '1.0', source: '/e2e', type: 't' }],
    ['source', { specversion: '1.0', id: 'x', type: 't' }],
    ['type', { specversion: '1.0', id: 'x', source: '/e2e' }],
    ['specversion', { id: 'x', source: '/e2e', type: 't' }],
  ])('answers 400 naming "%s" when it is missing, and writes nothing to Kafka', async (attribute, event) => {
    const before = await endOffsets();
    const response = await fetch(`${api}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify(event),
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      code: 'INVALID_CLOUDEVENT',
      message: `missing required attribute "${attribute}"`,
      attribute,
    });
    expect(await endOffsets()).toBe(before);
  });
});
