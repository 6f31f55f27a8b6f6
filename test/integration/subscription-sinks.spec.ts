import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { AddressInfo, createServer as createTcpServer, Server as TcpServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { DevSigningKey, ensureDevSigningKey, mintDevToken, parseMintArgs } from '@libs/security/dev-token';
import { testConfig, tokenGateEnv, uniqueTopic } from '../support/env';
import { WebhookReceiver } from '../support/webhook-receiver';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

/**
 * What a webhook sink may be, on a real gateway behind the real token gate (enforcing, JWTs from a keys file,
 * operator tenant `ops`) and real Postgres and Kafka: who may skip the validation handshake (`config.trusted`),
 * the sinks refused before anything is sent (a URL with credentials, this runtime's own publish route), and the
 * one answer a handshake that got no answer gives, however the connection failed.
 */
describe('webhook sinks: trust, credentials, loops and the handshake (real gateway, token gate)', () => {
  const suffix = randomUUID().slice(0, 8);
  const topic = uniqueTopic('sinks');
  const TENANT = `acme-${suffix}`;
  const receiver = new WebhookReceiver();
  let dir: string;
  let signing: DevSigningKey;
  let instance: RunningInstance;
  let tenant: string;
  let tenantAdmin: string;
  let operator: string;
  let operatorWithoutAdmin: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'subscription-sinks-spec-'));
    signing = await ensureDevSigningKey(dir);
    await receiver.start();
    const jwt = (t: string, scopes: string) =>
      mintDevToken(signing, parseMintArgs(['--tenant', t, '--scopes', scopes, '--sub', `${t}-caller`]));
    tenant = await jwt(TENANT, 'subscribe');
    tenantAdmin = await jwt(TENANT, 'subscribe,admin');
    operator = await jwt('ops', 'subscribe,admin');
    operatorWithoutAdmin = await jwt('ops', 'subscribe');
    instance = await startInstance(
      testConfig({
        EVENTMESH_INSTANCE_ID: `sinks-${suffix}`,
        EVENTMESH_KAFKA_TOPICS: topic,
        EVENTMESH_HTTP_PORT: '0',
        EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
        // A sink that never answers is given up on within this (the handshake's timeout).
        EVENTMESH_DELIVERY_WEBHOOK_TIMEOUT_MS: '500',
        ...tokenGateEnv(signing.jwksPath),
      }),
      { roles: ['gateway'] },
    );
  });
  afterAll(async () => {
    await instance?.close();
    await receiver.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = async (token: string, method: string, path: string, body?: unknown): Promise<Answer> => {
    const response = await fetch(`${instance.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
  };
  const rowsOf = async (t: string): Promise<{ id: string; sink: string; config: Record<string, unknown> }[]> =>
    instance.deps.db.query(`SELECT id, sink, config FROM subscriptions WHERE tenant = $1 ORDER BY created_at`, [t]);

  describe('config.trusted (skips the validation handshake)', () => {
    it.each([
      ['a tenant', () => tenant],
      ['an admin of a tenant that is not the operator', () => tenantAdmin],
      ['a caller of the operator tenant without the admin scope', () => operatorWithoutAdmin],
    ])('is refused 403 to %s, with a machine-readable body, nothing written and nothing sent', async (_, token) => {
      const handshakes = receiver.handshakes.length;
      const owner = token() === operatorWithoutAdmin ? 'ops' : TENANT;
      const before = await rowsOf(owner);
      const answer = await call(token(), 'POST', '/subscriptions', {
        topic,
        sink: receiver.url,
        config: { trusted: true },
      });
      expect(answer).toEqual({
        status: 403,
        body: {
          code: 'FORBIDDEN',
          message: expect.stringContaining('operator tenant') as unknown,
          field: 'config.trusted',
          reason: 'operator_only',
        },
      });
      expect(await rowsOf(owner)).toEqual(before);
      expect(receiver.handshakes.length).toBe(handshakes);
    });

    it('is refused 403 to a tenant replacing its subscription, which stays as it was', async () => {
      const created = await call(tenant, 'POST', '/subscriptions', { topic, sink: receiver.url });
      expect(created.status).toBe(201);
      const id = created.body.id as string;
      const handshakes = receiver.handshakes.length;
      const answer = await call(tenant, 'PUT', `/subscriptions/${id}`, {
        sink: `${receiver.url}/elsewhere`,
        config: { trusted: true },
      });
      expect(answer).toMatchObject({
        status: 403,
        body: { code: 'FORBIDDEN', field: 'config.trusted', reason: 'operator_only' },
      });
      expect(receiver.handshakes.length).toBe(handshakes);
      const [row] = (await rowsOf(TENANT)).filter((r) => r.id === id);
      expect(row).toMatchObject({ sink: receiver.url, config: { trusted: false } });
    });

    it("is the operator's: an admin of the operator tenant sets it, and no handshake is sent", async () => {
      const handshakes = receiver.handshakes.length;
      const created = await call(operator, 'POST', '/subscriptions', {
        topic,
        sink: receiver.url,
        config: { trusted: true },
      });
      expect(created).toMatchObject({ status: 201, body: { config: { trusted: true } } });
      expect(receiver.handshakes.length).toBe(handshakes);
    });
  });

  it('refuses a sink URL with a user name or password 400 SINK_NOT_ALLOWED, before the handshake, never echoing the password', async () => {
    const handshakes = receiver.handshakes.length;
    const before = await rowsOf('ops');
    const port = new URL(receiver.url!).port;
    for (const sink of [`http://user:s3cr3t-pw@127.0.0.1:${port}/hook`, `http://only-user@127.0.0.1:${port}/hook`]) {
      // The operator's trust skips the handshake, not the guard.
      const answer = await call(operator, 'POST', '/subscriptions', { topic, sink, config: { trusted: true } });
      expect(answer).toMatchObject({
        status: 400,
        body: { code: 'SINK_NOT_ALLOWED', field: 'sink', reason: 'userinfo' },
      });
      expect(JSON.stringify(answer.body)).not.toContain('s3cr3t-pw');
    }
    expect(receiver.handshakes.length).toBe(handshakes);
    expect(await rowsOf('ops')).toEqual(before);
  });

  it("refuses a sink at this runtime's own publish routes 400 SINK_NOT_ALLOWED (an event loop), even trusted by the operator", async () => {
    const port = new URL(instance.url!).port;
    const before = await rowsOf('ops');
    for (const sink of [
      `${instance.url}/events/publish?topic=${topic}`,
      `http://localhost:${port}/events/publish`,
      `http://127.0.0.1:${port}/events/request?topic=${topic}`,
    ]) {
      const answer = await call(operator, 'POST', '/subscriptions', { topic, sink, config: { trusted: true } });
      expect({ sink, ...answer }).toMatchObject({
        sink,
        status: 400,
        body: { code: 'SINK_NOT_ALLOWED', field: 'sink', reason: 'own_publish_route' },
      });
    }
    expect(await rowsOf('ops')).toEqual(before);
    // Another path of the same server is no publish route: the operator may trust it (it would fail otherwise).
    expect(
      (
        await call(operator, 'POST', '/subscriptions', {
          topic,
          sink: `${instance.url}/hook`,
          config: { trusted: true },
        })
      ).status,
    ).toBe(201);
  });

  describe('the validation handshake without an answer', () => {
    const servers: (Server | TcpServer)[] = [];
    const sockets: Socket[] = [];
    afterAll(async () => {
      for (const s of sockets) s.destroy();
      for (const s of servers) await new Promise((resolve) => s.close(resolve));
    });
    const listen = async (server: Server | TcpServer): Promise<number> => {
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return (server.address() as AddressInfo).port;
    };

    it('answers a refused connection, a reset and a timeout alike: nothing to tell open ports from closed ones', async () => {
      // A port nobody listens on: taken, then let go.
      const closed = createTcpServer();
      const closedPort = await listen(closed);
      await new Promise((resolve) => closed.close(resolve));
      servers.splice(servers.indexOf(closed), 1);
      // A server that takes the connection and resets it.
      const resetPort = await listen(createTcpServer((socket) => socket.resetAndDestroy()));
      // A server that takes the request and never answers.
      const silentPort = await listen(createServer((request) => sockets.push(request.socket)));

      const answers: Answer[] = [];
      for (const port of [closedPort, resetPort, silentPort]) {
        answers.push(await call(tenant, 'POST', '/subscriptions', { topic, sink: `http://127.0.0.1:${port}/hook` }));
      }
      const shapes = answers.map(
        (a, i) =>
          JSON.parse(JSON.stringify(a).replaceAll(String([closedPort, resetPort, silentPort][i]), '<port>')) as Answer,
      );
      expect(shapes[0]).toEqual({
        status: 400,
        body: {
          code: 'WEBHOOK_VALIDATION_FAILED',
          message: 'the sink did not answer the validation request',
          sink: 'http://127.0.0.1:<port>/hook',
        },
      });
      expect(shapes[1]).toEqual(shapes[0]);
      expect(shapes[2]).toEqual(shapes[0]);
    });
  });
});
