import { randomUUID } from 'node:crypto';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { kafkaFaultListener, testConfig, uniqueTopic } from '../support/env';
import { TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait-for';

/** The broker's fault-test listener, and the port it advertises (where the proxy listens). */
const { port: FAULT_LISTENER, advertisedPort: ADVERTISED } = kafkaFaultListener();
/** Time for the answer itself on a loaded machine, on top of a deadline. */
const SLACK_MS = 700;

/**
 * Request-reply's one deadline, against real Postgres and a real broker behind a proxy that can cut it off: the
 * request ends at its deadline however long Kafka takes to acknowledge the request's event, and a reply is
 * accepted exactly while the request can still answer with it.
 */
describe('request-reply deadline (real Postgres, Kafka behind a proxy)', () => {
  const topic = uniqueTopic('rrd');
  const instanceId = `rrd-${randomUUID().slice(0, 8)}`;
  const proxy = new TcpProxy(kafkaFaultListener().host, FAULT_LISTENER, ADVERTISED);
  let instance: RunningInstance;

  beforeAll(async () => {
    await proxy.start();
    instance = await startInstance(
      testConfig({
        EVENTMESH_INSTANCE_ID: instanceId,
        EVENTMESH_KAFKA_BROKERS: `${kafkaFaultListener().host}:${ADVERTISED}`,
        EVENTMESH_KAFKA_TOPICS: topic,
        EVENTMESH_HTTP_PORT: '0',
        // Longer than the requests' deadlines: here the request's own deadline must bound the wait.
        EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS: '15000',
      }),
      { roles: ['gateway'] },
    );
  });
  afterAll(async () => {
    await instance?.close();
    await proxy.stop();
  });

  const ask = (timeoutMs: number) =>
    fetch(`${instance.url}/events/request?topic=${topic}&timeoutMs=${timeoutMs}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/asker', type: 'rrd.ask' }),
    });
  const reply = (correlationId: string) =>
    fetch(`${instance.url}/events/reply`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({
        specversion: '1.0',
        id: randomUUID(),
        source: '/replier',
        type: 'rrd.answer',
        correlationid: correlationId,
      }),
    });
  const pending = async () =>
    (await instance.deps.db.query(`SELECT correlation_id FROM pending_requests WHERE instance_id = $1`, [
      instanceId,
    ])) as {
      correlation_id: string;
    }[];

  it('ends a request at its deadline while Kafka has not acknowledged its event, and refuses a reply after it', async () => {
    proxy.cut();
    try {
      const started = performance.now();
      const answer = await ask(1500);
      const elapsed = performance.now() - started;
      const body = (await answer.json()) as { code: string; correlationId: string };
      expect({ status: answer.status, body }).toMatchObject({ status: 408, body: { code: 'REQUEST_TIMEOUT' } });
      // At its deadline is the promise, so it is timed: not before it (a timer cannot fire early), and not much after
      // it (SLACK_MS, for the answer's trip through one loaded process that serves it and asks it); a request that
      // waited for Kafka's acknowledgement instead would end at the publish timeout, 15 s.
      expect(elapsed).toBeGreaterThanOrEqual(1500);
      expect(elapsed).toBeLessThan(1500 + SLACK_MS);
      const { correlationId } = body;
      // The request is over: its row is gone, and a reply is told so, not "delivered".
      expect(await pending()).toEqual([]);
      const late = await reply(correlationId);
      expect(late.status).toBe(404);
      expect(await late.json()).toMatchObject({
        code: 'REQUEST_NOT_PENDING',
        correlationId,
        delivered: false,
        reason: 'unknown',
      });
    } finally {
      proxy.heal();
    }
  });

  it('answers the requester with a reply accepted before the deadline, even while its event is still unacknowledged', async () => {
    proxy.cut();
    let asked: Promise<Response> | undefined;
    try {
      asked = ask(10000);
      const [row] = await waitFor('the request pending', async () => {
        const rows = await pending();
        return rows.length === 1 ? rows : undefined;
      });
      const accepted = await reply(row.correlation_id);
      expect({ status: accepted.status, body: await accepted.json() }).toEqual({
        status: 202,
        body: { correlationId: row.correlation_id, delivered: true },
      });
      // A second reply finds the request answered already.
      const second = await reply(row.correlation_id);
      expect(second.status).toBe(404);
      expect(await second.json()).toMatchObject({ delivered: false, reason: 'already-replied' });
    } finally {
      proxy.heal();
    }
    const answer = await asked!;
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ type: 'rrd.answer', source: '/replier' });
  });
});
