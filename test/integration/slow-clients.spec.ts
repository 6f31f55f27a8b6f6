import { randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import type { DataSource } from 'typeorm';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import type { EventProducer } from '@libs/kafka';
import { buildGates } from '@libs/security';
import { createDataSource } from '@libs/storage';
import { GATES_ENFORCING_TOKEN, testConfig } from '../support/env';
import { HeaderToken } from '../support/header-tenant-gate';
import { rawExchange } from '../support/raw-exchange';

const HEADERS_TIMEOUT_MS = 1000;
const REQUEST_TIMEOUT_MS = 2000;
const KEEP_ALIVE_TIMEOUT_MS = 1500;
/** How often Node checks the timers: a quarter of the headers timeout (gateway-server.ts, slowClientTimeouts). */
const CHECK_MS = HEADERS_TIMEOUT_MS / 4;
/**
 * How late past its timeout (and Node's check) a cut may come and still count: the timers run on the event loop of
 * a host shared by other suites, late by a second or two at worst. Node's own defaults, what the gateway had before
 * (60 s for headers, no limit on a body, checked every 30 s), are far past it.
 */
const LATE_MS = 5000;
/** What a slow client drips, and how often: it would go on far past every timeout. */
const DRIP_MS = 100;

interface Cut {
  /** The first line the server answered, if it answered before closing. */
  status?: string;
  /** The answer's body. */
  body: string;
  /** From the first byte sent to the server's close. */
  afterMs: number;
}

/**
 * A client on a raw socket that sends `head`, then one `drip` every DRIP_MS until the server closes the connection;
 * resolves with the server's answer line and when it closed. The client itself never stops first.
 */
function slowClient(port: number, head: string, drip: string): { cut: Promise<Cut>; socket: Socket } {
  const socket = connect(port, '127.0.0.1');
  const cut = new Promise<Cut>((resolve) => {
    let started = 0;
    let answer = '';
    let timer: NodeJS.Timeout | undefined;
    socket.on('connect', () => {
      started = Date.now();
      socket.write(head);
      timer = setInterval(() => socket.writable && socket.write(drip), DRIP_MS);
    });
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      resolve({
        status: answer.split('\r\n')[0] || undefined,
        body: answer.slice(answer.indexOf('\r\n\r\n') + 4),
        afterMs: Date.now() - started,
      });
    });
  });
  return { cut, socket };
}

/**
 * Slow clients on a real gateway (real Postgres and Kafka, the gate enforcing): a client that sends its headers or
 * its body slowly is answered 408 and cut at the configured timeout while other clients are served, an idle
 * keep-alive connection is closed, a held answer (a long-poll) is not cut, and an unauthenticated publish is
 * refused before its body is read.
 */
describe('slow clients (real gateway, timeouts configured)', () => {
  const run = randomUUID().slice(0, 6);
  const topic = `slow-${run}`;
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `slow-${run}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    EVENTMESH_HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    EVENTMESH_HTTP_KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_TIMEOUT_MS),
    ...GATES_ENFORCING_TOKEN,
  });
  const as = { 'x-test-principal': 'p', 'x-test-tenant': `slow-${run}` };
  const event = () => JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/slow-spec', type: 'slow.test' });
  let db: DataSource;
  let instance: RunningInstance;
  let url: string;
  let port: number;

  beforeAll(async () => {
    db = createDataSource(config.postgres, `slow-spec-${run}`);
    await db.initialize();
    const gates = buildGates(config, {
      db,
      producer: {} as EventProducer,
      instanceId: config.instance.id,
      filters: { token: new HeaderToken() },
    });
    instance = await startInstance(config, { roles: ['gateway'], gates });
    url = instance.url!;
    port = Number(new URL(url).port);
  });
  afterAll(async () => {
    await instance?.close();
    await db?.destroy();
  });

  const publish = () =>
    fetch(`${url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { ...as, 'content-type': 'application/cloudevents+json' },
      body: event(),
    });
  /**
   * The client was answered 408 CLIENT_TIMEOUT and cut at its timeout: not before it (less the moments between the
   * server's accept and the client's connect event), and not after Node's check and LATE_MS.
   */
  const expectCutAt = async (cut: Promise<Cut>, timeoutMs: number) => {
    const { status, body, afterMs } = await cut;
    expect(status).toBe('HTTP/1.1 408 Request Timeout');
    expect(JSON.parse(body)).toMatchObject({ code: 'CLIENT_TIMEOUT' });
    expect(afterMs).toBeGreaterThanOrEqual(timeoutMs - 100);
    expect(afterMs).toBeLessThan(timeoutMs + CHECK_MS + LATE_MS);
  };
  const credentials = Object.entries(as)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');

  it('cuts a client that sends its headers slowly (408) at the headers timeout, serving others meanwhile', async () => {
    const slow = [0, 1, 2].map(() => slowClient(port, `GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n`, 'X-Slow: 1\r\n'));
    // While they drip, other clients are answered.
    expect((await fetch(`${url}/health/live`)).status).toBe(200);
    expect((await publish()).status).toBe(202);
    for (const { cut } of slow) await expectCutAt(cut, HEADERS_TIMEOUT_MS);
  });

  it('cuts a client that sends its body slowly (408) at the request timeout, serving others meanwhile', async () => {
    const head = `POST /events/publish?topic=${topic} HTTP/1.1\r\nHost: 127.0.0.1\r\n${credentials}content-type: application/octet-stream\r\nce-specversion: 1.0\r\nce-id: ${randomUUID()}\r\nce-source: /slow\r\nce-type: slow.test\r\ncontent-length: 100000\r\n\r\n`;
    const slow = [0, 1, 2].map(() => slowClient(port, head, 'x'));
    expect((await publish()).status).toBe(202);
    for (const { cut } of slow) await expectCutAt(cut, REQUEST_TIMEOUT_MS);
  });

  it('closes a keep-alive connection left idle after its answer at the keep-alive timeout', async () => {
    const { status, closed } = await rawExchange(port, 'GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    expect(status).toBe('HTTP/1.1 200 OK');
    const idleMs = await closed;
    expect(idleMs).toBeGreaterThanOrEqual(KEEP_ALIVE_TIMEOUT_MS - 100);
    expect(idleMs).toBeLessThan(KEEP_ALIVE_TIMEOUT_MS + LATE_MS);
  });

  it('never cuts an answer it holds: a long-poll waiting past every timeout is answered 200', async () => {
    const created = await fetch(`${url}/subscriptions`, {
      method: 'POST',
      headers: { ...as, 'content-type': 'application/json' },
      body: JSON.stringify({ protocol: 'STREAM', topic }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const waitMs = REQUEST_TIMEOUT_MS + KEEP_ALIVE_TIMEOUT_MS + 1000;
    const started = Date.now();
    const polled = await fetch(`${url}/subscriptions/${id}/poll?waitMs=${waitMs}&max=1`, { headers: as });
    expect(polled.status).toBe(200);
    expect(((await polled.json()) as { deliveries: unknown[] }).deliveries).toHaveLength(0);
    // Held past the request and keep-alive timeouts, as asked.
    expect(Date.now() - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS + KEEP_ALIVE_TIMEOUT_MS);
  });

  it('refuses an unauthenticated publish 401 before reading its body, and closes the connection', async () => {
    // The headers promise a body that never comes: only an answer given before the body is read can arrive.
    const { status, closed } = await rawExchange(
      port,
      `POST /events/publish?topic=${topic} HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/cloudevents+json\r\ncontent-length: 100000\r\n\r\n`,
    );
    expect(status).toBe('HTTP/1.1 401 Unauthorized');
    await closed;
  });

  it.each([
    'POST /events/request',
    'POST /events/reply',
    'POST /subscriptions',
    'PUT /subscriptions/00000000-0000-4000-8000-000000000000',
    'POST /topics',
    'POST /admin/api-keys',
    'PUT /a2a/agents/slow-agent',
    'POST /a2a/agents/slow-agent/rpc',
  ])(
    'refuses an unauthenticated %s 401 before reading its body (Fastify routes), and closes the connection',
    async (route) => {
      const [method, path] = route.split(' ');
      const { status, closed } = await rawExchange(
        port,
        `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n`,
      );
      expect(status).toBe('HTTP/1.1 401 Unauthorized');
      await closed;
    },
  );
});
