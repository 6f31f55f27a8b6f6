import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { Client as PgClient } from 'pg';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { testConfig, uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/**
 * Request-reply across two real instances: the requester's HTTP request is held by instance A, the replier
 * answers through instance B, and Postgres NOTIFY carries the reply to A. A responder service (a webhook
 * subscribed to the topic) plays the replier.
 */
describe('request-reply across instances', () => {
  const topic = uniqueTopic('rr');
  const ids = { a: `rr-a-${randomUUID().slice(0, 6)}`, b: `rr-b-${randomUUID().slice(0, 6)}` };
  const responder = new WebhookReceiver();
  const instances: InstanceProcess[] = [];
  let a: string;
  let b: string;
  let temporal: { client: Client; close(): Promise<void> };

  const spawn = async (id: string, roles: string) => {
    const instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: id,
      EVENTMESH_INSTANCE_ROLES: roles,
      EVENTMESH_KAFKA_TOPICS: topic,
    });
    instances.push(instance);
    return instance.ready();
  };

  beforeAll(async () => {
    temporal = await temporalClient();
    [a, b] = await Promise.all([spawn(ids.a, 'gateway,worker'), spawn(ids.b, 'gateway')]);
    // The responder answers every 'rr.ask' event through instance B, echoing its data.
    responder.onEvent = (event) => {
      if (event.headers['ce-type'] !== 'rr.ask') return;
      void fetch(`${b}/events/reply`, {
        method: 'POST',
        headers: {
          'ce-specversion': '1.0',
          'ce-id': randomUUID(),
          'ce-source': '/responder',
          'ce-type': 'rr.answer',
          'ce-correlationid': String(event.headers['ce-correlationid']),
          'content-type': 'application/json',
        },
        body: event.body,
      });
    };
    const sink = await responder.start();
    const created = await fetch(`${a}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sink, topic }),
    });
    expect(created.status).toBe(201);
  });

  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop()));
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(ids.a)]);
    await temporal.close();
    await responder.stop();
  });

  const ask = (type: string, timeoutMs: number) =>
    fetch(`${a}/events/request?topic=${topic}&timeoutMs=${timeoutMs}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/asker', type, data: { question: 42 } }),
    });

  it('holds the request on one instance until the reply arrives through another', async () => {
    const response = await ask('rr.ask', 60000);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('application/cloudevents+json');
    const reply = (await response.json()) as Record<string, unknown>;
    expect(reply).toMatchObject({ type: 'rr.answer', source: '/responder', data: { question: 42 } });
    expect(reply.correlationid).toEqual(expect.any(String));
  }, 120000);

  it('answers 408 when no reply comes in time, and drops and counts a reply that comes late', async () => {
    const started = Date.now();
    // Nobody answers it: its 408 at 800 ms is the promise, with no race for a loaded host to lose.
    const response = await ask('rr.unanswered', 800);
    expect(response.status).toBe(408);
    expect(Date.now() - started).toBeGreaterThanOrEqual(800);
    const body = (await response.json()) as { code: string; correlationId: string };
    expect(body.code).toBe('REQUEST_TIMEOUT');

    const before = (await (await fetch(`${b}/health`)).json()) as { stats: { requestReply: { lateReplies: number } } };
    const late = await fetch(`${b}/events/reply`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({
        specversion: '1.0',
        id: randomUUID(),
        source: '/late',
        type: 't',
        correlationid: body.correlationId,
      }),
    });
    expect(late.status).toBe(404);
    expect(await late.json()).toMatchObject({ code: 'REQUEST_NOT_PENDING', correlationId: body.correlationId });
    const after = (await (await fetch(`${b}/health`)).json()) as { stats: { requestReply: { lateReplies: number } } };
    expect(after.stats.requestReply.lateReplies).toBe(before.stats.requestReply.lateReplies + 1);
  });

  it('refuses a reply to a request whose holding process died, rather than answer it "delivered" and drop it', async () => {
    const id = `rr-c-${randomUUID().slice(0, 6)}`;
    const holder = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: id,
      EVENTMESH_INSTANCE_ROLES: 'gateway',
      EVENTMESH_KAFKA_TOPICS: topic,
    });
    instances.push(holder);
    const url = await holder.ready();
    const db = new PgClient(testConfig().postgres);
    await db.connect();
    try {
      // A request nobody answers, held by the process about to die (its connection dies with it).
      const held = fetch(`${url}/events/request?topic=${topic}&timeoutMs=60000`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/asker', type: 'rr.crash' }),
      }).catch((e: Error) => e);
      const correlationId = await waitFor('the request pending', async () => {
        const { rows } = await db.query<{ correlation_id: string }>(
          `SELECT correlation_id FROM pending_requests WHERE instance_id = $1`,
          [id],
        );
        return rows[0]?.correlation_id;
      });
      holder.child.kill('SIGKILL');
      await holder.exit(60000);
      // The request fails with the connection (fetch's TypeError comes from Node's realm, not jest's: no instanceof).
      expect(await held).toMatchObject({ message: expect.stringMatching(/fetch failed/) });
      // Postgres has seen the process go (its sessions ended); the row itself is still there, deadline ahead.
      await waitFor('the dead process to have no Postgres session', async () => {
        const { rows } = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1`,
          [`eventmesh-${id}-%`],
        );
        return rows[0].n === 0;
      });
      const { rows } = await db.query(`SELECT 1 FROM pending_requests WHERE correlation_id = $1 AND deadline > now()`, [
        correlationId,
      ]);
      expect(rows).toHaveLength(1);

      const before = (await (await fetch(`${b}/health`)).json()) as {
        stats: { requestReply: { requesterGone: number } };
      };
      const reply = await fetch(`${b}/events/reply`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({
          specversion: '1.0',
          id: randomUUID(),
          source: '/responder',
          type: 'rr.answer',
          correlationid: correlationId,
        }),
      });
      expect(reply.status).toBe(404);
      expect(await reply.json()).toMatchObject({
        code: 'REQUEST_NOT_PENDING',
        correlationId,
        delivered: false,
        reason: 'requester-gone',
      });
      const after = (await (await fetch(`${b}/health`)).json()) as {
        stats: { requestReply: { requesterGone: number } };
      };
      expect(after.stats.requestReply.requesterGone).toBe(before.stats.requestReply.requesterGone + 1);
    } finally {
      await db.end();
    }
  }, 180000);

  it('refuses a reply without a correlation id, and a bad timeout', async () => {
    const reply = await fetch(`${b}/events/reply`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id: 'r', source: '/s', type: 't' }),
    });
    expect(reply.status).toBe(400);
    expect(await reply.json()).toMatchObject({ code: 'INVALID_CLOUDEVENT', attribute: 'correlationid' });
    expect((await ask('rr.ask', 0)).status).toBe(400);
  });
});
