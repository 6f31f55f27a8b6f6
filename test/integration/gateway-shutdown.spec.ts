import { randomUUID } from 'node:crypto';
import { connect, Socket } from 'node:net';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import { dispatchWorkflowIdOf } from '../../libs/temporal';
import { testConfig, uniqueTopic } from '../support/env';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * An instance's shutdown does not wait on its clients (docs/operations.md#logs, "A shutdown that hangs"): a long-poll
 * waiting for events is answered at once, and a connection whose answer does not end (an SSE stream, here also a
 * client that never reads) is closed within the HTTP close grace (5 s), not held until the client leaves.
 */
describe('gateway shutdown (real servers)', () => {
  const topic = uniqueTopic('shutdown');
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `shutdown-${randomUUID().slice(0, 8)}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
    EVENTMESH_HTTP_PORT: '0',
  });
  let instance: RunningInstance | undefined;
  const sockets: Socket[] = [];

  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await instance?.close();
    const temporal = await temporalClient();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(config.instance.id)]);
    await temporal.close();
  });

  it('answers a waiting long-poll at once, and closes a stream whose client does not read, when the instance closes', async () => {
    instance = await startInstance(config);
    const url = new URL(instance.url!);
    const created = await fetch(`${instance.url}/subscriptions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ protocol: 'STREAM', topic }) });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };

    // A long-poll that would wait 20 s for an event that never comes.
    const polled = fetch(`${instance.url}/subscriptions/${id}/poll?consumer=c1&waitMs=20000`).then(async (r) => ({ status: r.status, body: (await r.json()) as { deliveries: unknown[] } }));
    // An SSE stream on a raw socket that never reads what it is sent.
    const raw = connect(Number(url.port), url.hostname);
    sockets.push(raw);
    let ended = false;
    let head = '';
    raw.on('close', () => (ended = true));
    raw.on('error', () => undefined);
    // Its answer's head is read, then nothing more.
    raw.once('data', (chunk: Buffer) => {
      head = chunk.toString('latin1');
      raw.pause();
    });
    raw.write(`GET /subscriptions/${id}/events HTTP/1.1\r\nHost: ${url.host}\r\nAccept: text/event-stream\r\n\r\n`);
    await waitFor('the stream open and the long-poll waiting', async () => {
      const health = (await (await fetch(`${instance!.url}/health`)).json()) as { stats: { pollConsumers: number } };
      return head.startsWith('HTTP/1.1 200') && health.stats.pollConsumers === 1;
    });

    const closed = instance.close().then(() => Date.now());
    const startedAt = Date.now();
    const answer = await polled;
    expect(answer).toEqual({ status: 200, body: expect.objectContaining({ deliveries: [] }) });
    // Well before the poll's 20 s: the consumers are let go before the HTTP server closes.
    expect(Date.now() - startedAt).toBeLessThan(15_000);
    const closedAt = await closed;
    instance = undefined;
    expect(closedAt - startedAt).toBeLessThan(15_000);
    await waitFor('the stream\'s connection closed by the gateway', () => ended, { timeoutMs: 5000 });
  });
});
