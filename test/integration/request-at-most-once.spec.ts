import { randomUUID } from 'node:crypto';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import { testConfig, uniqueTopic } from '../support/env';
import { terminateDispatch } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { ReceivedRequest, WebhookReceiver } from '../support/webhook-receiver';

/** Whether the sink got a request's event (it carries the correlationid extension, as a header or in the body). */
const isRequest = (r: ReceivedRequest) =>
  r.headers['ce-correlationid'] !== undefined || r.body.toString('utf8').includes('"correlationid"');

/**
 * Request-reply's exception to at-least-once, on a real instance (gateway and worker, real servers): a request's
 * event whose delivery fails is not attempted again (no retry, no parking, no dead letter), and its requester gets
 * 408 at its deadline; an ordinary event of the same partition, published after it, is delivered.
 */
describe('a request is delivered at most once (real servers)', () => {
  const topic = uniqueTopic('at-most-once');
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `at-most-once-${randomUUID().slice(0, 8)}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
    // A failed ordinary delivery is tried again at once, in its lane, before the events behind it.
    EVENTMESH_DELIVERY_RETRY_INITIAL_MS: '10',
    EVENTMESH_DELIVERY_RETRY_MAX_MS: '20',
  });
  const receiver = new WebhookReceiver();
  let instance: RunningInstance;

  beforeAll(async () => {
    await receiver.start();
    // The sink fails every request; it takes every other event.
    receiver.status = (r) => (isRequest(r) ? 500 : 200);
    instance = await startInstance(config);
  });
  afterAll(async () => {
    await instance?.close();
    await receiver.stop();
    await terminateDispatch(config.instance.id);
  });

  it('attempts a failing request once, answers its requester 408, and delivers the events behind it', async () => {
    const created = await fetch(`${instance.url}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sink: receiver.url, topic }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const request = await fetch(`${instance.url}/events/request?topic=${topic}&timeoutMs=3000`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/asker', type: 'at-most-once.ask' }),
    });
    expect(request.status).toBe(408);
    expect(await request.json()).toMatchObject({ code: 'REQUEST_TIMEOUT' });
    const after = randomUUID();
    const published = await fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id: after, source: '/publisher', type: 'at-most-once.plain' }),
    });
    expect(published.status).toBe(202);
    // The ordinary event is behind the request in the partition: once it is delivered, the lane settled the request.
    await waitFor(
      'the event published after the request delivered',
      () => receiver.requests.some((r) => r.headers['ce-id'] === after),
      { timeoutMs: 60000 },
    );
    expect(receiver.requests.filter(isRequest)).toHaveLength(1);
    const [stored] = (await instance.deps.db.query(
      'SELECT (SELECT count(*) FROM dead_letters WHERE subscription_id = $1)::int AS dead, (SELECT count(*) FROM delivery_retries WHERE subscription_id = $1)::int AS parked',
      [id],
    )) as { dead: number; parked: number }[];
    expect(stored).toEqual({ dead: 0, parked: 0 });
  }, 120000);
});
