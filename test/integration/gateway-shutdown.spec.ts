import { randomUUID } from 'node:crypto';
import { connect, Socket } from 'node:net';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { testConfig, uniqueTopic } from '../support/env';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/** The longest a long-poll may wait (MAX_WAIT_MS, apps/gateway/src/streams/streams.controller.ts). */
const POLL_WAIT_MS = 60_000;
/** The HTTP server's close grace (apps/gateway/src/gateway-server.ts). */
const HTTP_CLOSE_GRACE_MS = 5000;
/** Ten times a shutdown's typical length here (the grace, then the instance's other closing): it hung. */
const HUNG_MS = 60_000;

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
    const created = await fetch(`${instance.url}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ protocol: 'STREAM', topic }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };

    // A long-poll that would wait the longest a poll may (60 s) for an event that never comes.
    const polled = fetch(`${instance.url}/subscriptions/${id}/poll?consumer=c1&waitMs=${POLL_WAIT_MS}`).then(
      async (r) => ({ status: r.status, body: (await r.json()) as { deliveries: unknown[] } }),
    );
    // An SSE stream on a raw socket that never reads what it is sent.
    const raw = connect(Number(url.port), url.hostname);
    sockets.push(raw);
    let ended = false;
    let endedAt = 0;
    let head = '';
    raw.on('close', () => {
      ended = true;
      endedAt = Date.now();
    });
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
    // Answered by the shutdown, as a poll that found nothing: the consumers are let go before the HTTP server closes.
    // A poll not let go would have its connection closed by the HTTP close grace (a failed fetch, not a 200), and
    // its own wait (60 s) is far past the deadline below, which only means "hung" (typically it is milliseconds).
    expect(answer).toEqual({ status: 200, body: expect.objectContaining({ deliveries: [] }) });
    expect(Date.now() - startedAt).toBeLessThan(POLL_WAIT_MS / 2);
    // The close does not wait on the client that never reads nor leaves: it ends at all (typically in the grace and
    // a few seconds of the instance's other closing; the deadline only means "hung"), and the gateway closed the
    // stream's connection.
    const closedAt = await closed;
    instance = undefined;
    expect(closedAt - startedAt).toBeLessThan(HUNG_MS);
    await waitFor("the stream's connection closed by the gateway", () => ended, { timeoutMs: 60_000 });
    // Closed by the HTTP close grace (5 s, the runtime's figure): the promise, so timed, from the client's close
    // event. The margin is for a loaded 2-core host running the gateway, its client and the grace's timer in this
    // one process; without the grace nothing would close it (the client never reads nor leaves).
    expect(endedAt - startedAt).toBeLessThan(HTTP_CLOSE_GRACE_MS + 10_000);
  }, 180_000);
});
