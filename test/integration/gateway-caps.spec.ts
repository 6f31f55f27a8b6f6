import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { connect, Socket } from 'node:net';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { testConfig, uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';

const RETRY_AFTER_SECONDS = 3;

/** One request on a connection of its own, closed after the answer. */
function getOnce(
  url: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false, headers: { connection: 'close' } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: JSON.parse(text || '{}') as Record<string, unknown>,
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(60000, () => req.destroy(new Error('no answer within 60 s')));
    req.end();
  });
}

/** A raw keep-alive connection that has had one request answered (so the server surely counts it). */
async function openHeldConnection(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    let text = '';
    socket.once('error', reject);
    socket.on('data', (d: Buffer) => {
      text += d.toString();
      if (text.includes('\r\n\r\n')) resolve();
    });
    socket.write('GET /subscriptions HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
  });
  return socket;
}

/** The caps of a gateway process, each answered with a clear status and code when exceeded. */
describe('gateway caps', () => {
  describe('HTTP connections', () => {
    let instance: RunningInstance;
    const sockets: Socket[] = [];

    beforeAll(async () => {
      instance = await startInstance(
        testConfig({
          EVENTMESH_INSTANCE_ID: `caps-conn-${randomUUID().slice(0, 8)}`,
          EVENTMESH_KAFKA_TOPICS: uniqueTopic('caps'),
          EVENTMESH_HTTP_PORT: '0',
          EVENTMESH_HTTP_MAX_CONNECTIONS: '3',
          EVENTMESH_HTTP_RETRY_AFTER_SECONDS: String(RETRY_AFTER_SECONDS),
        }),
        { roles: ['gateway'] },
      );
    });
    afterAll(async () => {
      for (const s of sockets) s.destroy();
      await instance?.close();
    });

    it('answers a request on a connection past the cap 503 OVERLOADED with Retry-After and closes it; a freed slot is used again', async () => {
      const port = Number(new URL(instance.url!).port);
      for (let i = 0; i < 3; i++) sockets.push(await openHeldConnection(port));
      const refused = await getOnce(`${instance.url}/subscriptions`);
      expect(refused.status).toBe(503);
      expect(refused.headers['retry-after']).toBe(String(RETRY_AFTER_SECONDS));
      expect(refused.headers.connection).toBe('close');
      expect(refused.body).toMatchObject({ code: 'OVERLOADED', limit: 'httpConnections', maxConnections: 3 });
      // The publish route, served ahead of the router, is capped the same way.
      const publish = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          `${instance.url}/events/publish`,
          { method: 'POST', agent: false, headers: { 'content-type': 'application/cloudevents+json' } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify({ specversion: '1.0', id: 'x', source: '/caps', type: 't' }));
      });
      expect(publish).toBe(503);
      // A WebSocket upgrade does not pass the server's request handler; it is refused all the same.
      const upgrade = await new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1');
        let text = '';
        const timer = setTimeout(() => {
          socket.destroy();
          reject(new Error(`the upgrade past the cap was not answered and closed within 60 s: ${text}`));
        }, 60000);
        socket.once('error', reject);
        socket.on('data', (d: Buffer) => (text += d.toString()));
        socket.once('close', () => {
          clearTimeout(timer);
          resolve(text);
        });
        socket.write(
          'GET /subscriptions/any/ws HTTP/1.1\r\nhost: 127.0.0.1\r\nupgrade: websocket\r\nconnection: Upgrade\r\n' +
            'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n',
        );
      });
      expect(upgrade).toMatch(/^HTTP\/1\.1 503 /);
      expect(upgrade).toContain('"code":"OVERLOADED"');

      sockets.pop()!.destroy();
      const admitted = await waitFor('a connection admitted again', async () => {
        const r = await getOnce(`${instance.url}/subscriptions`);
        return r.status === 200 ? r : undefined;
      });
      expect(admitted.status).toBe(200);
    }, 240000);
  });

  describe('long-poll consumers and pending request-replies', () => {
    const topic = uniqueTopic('caps');
    const instanceId = `caps-${randomUUID().slice(0, 8)}`;
    let instance: RunningInstance;

    beforeAll(async () => {
      instance = await startInstance(
        testConfig({
          EVENTMESH_INSTANCE_ID: instanceId,
          EVENTMESH_KAFKA_TOPICS: topic,
          EVENTMESH_HTTP_PORT: '0',
          EVENTMESH_STREAMS_POLL_MAX_CONSUMERS: '2',
          EVENTMESH_HTTP_MAX_PENDING_REQUESTS: '2',
          EVENTMESH_HTTP_RETRY_AFTER_SECONDS: String(RETRY_AFTER_SECONDS),
        }),
        { roles: ['gateway'] },
      );
    });
    afterAll(async () => {
      await instance?.close();
    });

    it('refuses a new long-poll consumer name past the cap of a subscription with 429 TOO_MANY_CONSUMERS; known names keep polling', async () => {
      const created = await fetch(`${instance.url}/subscriptions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ protocol: 'STREAM', topic }),
      });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const poll = (consumer: string) =>
        fetch(`${instance.url}/subscriptions/${id}/poll?consumer=${consumer}&waitMs=0`);
      expect((await poll('a')).status).toBe(200);
      expect((await poll('b')).status).toBe(200);
      const refused = await poll('c');
      expect(refused.status).toBe(429);
      expect(await refused.json()).toMatchObject({ code: 'TOO_MANY_CONSUMERS', subscriptionId: id, maxConsumers: 2 });
      // A poll without a name takes a fresh one: refused too.
      expect((await fetch(`${instance.url}/subscriptions/${id}/poll?waitMs=0`)).status).toBe(429);
      expect((await poll('a')).status).toBe(200);
    });

    it('refuses a request-reply past the pending cap with 503 OVERLOADED and Retry-After, publishing nothing', async () => {
      const ask = () =>
        fetch(`${instance.url}/events/request?topic=${topic}&timeoutMs=60000`, {
          method: 'POST',
          headers: { 'content-type': 'application/cloudevents+json' },
          body: JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/caps', type: 'caps.ask' }),
        });
      const pendingIds = async () =>
        (
          (await instance.deps.db.query(`SELECT correlation_id FROM pending_requests WHERE instance_id = $1`, [
            instanceId,
          ])) as {
            correlation_id: string;
          }[]
        ).map((r) => r.correlation_id);
      const ends = async () => [...(await instance.deps.topics.endOffsets(topic)).values()].reduce((a, b) => a + b, 0);

      const first = [ask(), ask()];
      const waiting = await waitFor('two requests pending', async () => {
        const ids = await pendingIds();
        return ids.length === 2 ? ids : undefined;
      });
      await waitFor('both request events written', async () => (await ends()) === 2);
      const refused = await ask();
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe(String(RETRY_AFTER_SECONDS));
      expect(await refused.json()).toMatchObject({ code: 'OVERLOADED', limit: 'pendingRequests', maxPending: 2 });
      expect(await ends()).toBe(2);

      // Replies end the two waiting requests; then a request is taken again.
      for (const correlationId of waiting) {
        const reply = await fetch(`${instance.url}/events/reply`, {
          method: 'POST',
          headers: { 'content-type': 'application/cloudevents+json' },
          body: JSON.stringify({
            specversion: '1.0',
            id: randomUUID(),
            source: '/caps',
            type: 'caps.answer',
            correlationid: correlationId,
          }),
        });
        expect(reply.status).toBe(202);
        expect(await reply.json()).toEqual({ correlationId, delivered: true });
      }
      expect((await Promise.all(first)).map((r) => r.status)).toEqual([200, 200]);
      // Nobody answers this one: its 408 at 300 ms is the promise, with no race for a loaded host to lose.
      const again = fetch(`${instance.url}/events/request?topic=${topic}&timeoutMs=300`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/caps', type: 'caps.ask' }),
      });
      expect((await again).status).toBe(408);
    }, 120000);
  });
});
