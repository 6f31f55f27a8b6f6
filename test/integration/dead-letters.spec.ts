import { randomUUID } from 'node:crypto';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { DeadLetter, DeadLetterReplayStore, DeadLetterStore } from '@libs/storage';
import {
  DEAD_LETTER_TASK_QUEUE,
  dispatchWorkflowIdOf,
  DLQ_RETENTION_SCHEDULE_ID,
  dlqReplayWorkflowIdOf,
} from '@libs/temporal';
import { dlqReplayWorkflow } from '../../workflows';
import { testConfig, uniqueTopic } from '../support/env';
import { terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

/**
 * A subscription's dead-letter queue through the API, on a real gateway and worker (Postgres, Kafka, Temporal):
 * browsing with filters and cursor paging, reading one letter with its event, a purge that needs its
 * confirmation, and a replay (the dlq-replay workflow) that delivers each dead letter once to its own
 * subscription and, run again, nothing more. Retention runs as the Temporal schedule dlq-retention.
 */
describe('dead letters (real servers)', () => {
  const topic = uniqueTopic('dlq');
  const instanceId = `dlq-${randomUUID().slice(0, 8)}`;
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: instanceId,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '8',
    EVENTMESH_HTTP_PORT: '0',
    // Two quick attempts, then the dead-letter queue; no breaker pause between the failures.
    EVENTMESH_DELIVERY_MAX_ATTEMPTS: '2',
    EVENTMESH_DELIVERY_RETRY_INITIAL_MS: '10',
    EVENTMESH_DELIVERY_RETRY_MAX_MS: '20',
    EVENTMESH_DELIVERY_BREAKER_FAILURE_THRESHOLD: '100000',
    EVENTMESH_DELIVERY_LEASE_TTL_MS: '3000',
  });
  const receiver = new WebhookReceiver();
  const bystander = new WebhookReceiver();
  let instance: RunningInstance;
  let store: DeadLetterStore;
  const replayIds: string[] = [];

  beforeAll(async () => {
    await receiver.start();
    await bystander.start();
    instance = await startInstance(config, { roles: ['gateway', 'worker'] });
    store = new DeadLetterStore(instance.deps.db);
  });

  afterAll(async () => {
    const client = instance?.deps.temporal.client;
    if (client)
      await terminateWorkflows(client, [dispatchWorkflowIdOf(instanceId), ...replayIds.map(dlqReplayWorkflowIdOf)]);
    await instance?.close();
    await receiver.stop();
    await bystander.stop();
  });

  const call = async (method: string, path: string, body?: unknown): Promise<Answer> => {
    const response = await fetch(`${instance.url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
  };
  const subscribe = async (sink: string): Promise<string> => {
    const answer = await call('POST', '/subscriptions', { topic, sink });
    expect(answer.status).toBe(201);
    return answer.body.id as string;
  };
  const letter = (
    subscriptionId: string,
    offset: number,
    attributes: Record<string, string>,
    lastError: string,
  ): DeadLetter => ({
    subscriptionId,
    topic,
    partition: 0,
    offset,
    eventId: attributes.id,
    attributes: { specversion: '1.0', ...attributes },
    data: Buffer.from(JSON.stringify({ n: offset })),
    attempts: 2,
    lastError,
    firstFailedAt: new Date(),
    lastFailedAt: new Date(),
  });
  const idsAt = (r: WebhookReceiver) => r.requests.map((q) => String(q.headers['ce-id']));
  const okAt = (r: WebhookReceiver, ok: Set<string>) => idsAt(r).filter((id) => ok.has(id));

  describe('browse, read and purge', () => {
    let sub: string;
    beforeAll(async () => {
      sub = await subscribe(bystander.url!);
      const letters = Array.from({ length: 12 }, (_, n) =>
        letter(
          sub,
          n,
          {
            id: `b-${n}`,
            source: n % 2 === 0 ? '/even' : '/odd',
            type: n < 6 ? 'order.created' : 'order.paid',
            datacontenttype: 'application/json',
          },
          n % 3 === 0 ? 'HTTP 500' : 'connect ECONNREFUSED 127.0.0.1:9',
        ),
      );
      expect((await store.add(letters)).every((r) => r.written)).toBe(true);
      // The first four were dead-lettered a day ago.
      await instance.deps.db.query(
        `UPDATE dead_letters SET created_at = now() - interval '1 day' WHERE subscription_id = $1 AND kafka_offset < 4`,
        [sub],
      );
    });

    it('pages through every letter with an opaque cursor, in the order written', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const answer: Answer = await call(
          'GET',
          `/subscriptions/${sub}/dead-letters?limit=5${cursor ? `&cursor=${cursor}` : ''}`,
        );
        expect(answer.status).toBe(200);
        const items = answer.body.items as { eventId: string; attributes: Record<string, unknown> }[];
        expect(items.length).toBeLessThanOrEqual(5);
        seen.push(...items.map((i) => i.eventId));
        cursor = answer.body.next as string | null;
        pages++;
      } while (cursor);
      expect(pages).toBe(3);
      expect(seen).toEqual(Array.from({ length: 12 }, (_, n) => `b-${n}`));
    });

    it('filters by type, source, last error, HTTP status and time range', async () => {
      const ids = async (query: string) => {
        const answer = await call('GET', `/subscriptions/${sub}/dead-letters?${query}`);
        expect(answer.status).toBe(200);
        return (answer.body.items as { eventId: string }[]).map((i) => i.eventId);
      };
      expect(await ids('type=order.paid&source=/even')).toEqual(['b-6', 'b-8', 'b-10']);
      expect(await ids('httpStatus=500')).toEqual(['b-0', 'b-3', 'b-6', 'b-9']);
      expect(await ids('lastError=econnrefused&type=order.created')).toEqual(['b-1', 'b-2', 'b-4', 'b-5']);
      const hourAgo = new Date(Date.now() - 3600_000).toISOString();
      expect(await ids(`to=${hourAgo}`)).toEqual(['b-0', 'b-1', 'b-2', 'b-3']);
      expect(await ids(`from=${hourAgo}&source=/odd`)).toEqual(['b-5', 'b-7', 'b-9', 'b-11']);
      // No letter matches: an empty page, no cursor.
      expect(await call('GET', `/subscriptions/${sub}/dead-letters?type=nope`)).toMatchObject({
        status: 200,
        body: { items: [], next: null },
      });
    });

    it('refuses a bad filter with 400 naming the field', async () => {
      for (const [query, field] of [
        ['from=yesterday', 'from'],
        ['from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z', 'to'],
        ['limit=0', 'limit'],
        ['limit=1001', 'limit'],
        ['httpStatus=5xx', 'httpStatus'],
        ['state=gone', 'state'],
        ['cursor=not-a-cursor', 'cursor'],
        ['colour=red', 'colour'],
      ]) {
        const answer = await call('GET', `/subscriptions/${sub}/dead-letters?${query}`);
        expect({ query, status: answer.status, code: answer.body.code, field: answer.body.field }).toEqual({
          query,
          status: 400,
          code: 'INVALID_REQUEST',
          field,
        });
      }
      expect(await call('GET', `/subscriptions/${randomUUID()}/dead-letters`)).toMatchObject({
        status: 404,
        body: { code: 'SUBSCRIPTION_NOT_FOUND' },
      });
    });

    it('reads one letter with its event', async () => {
      const [first] = (await call('GET', `/subscriptions/${sub}/dead-letters?limit=1`)).body.items as { id: string }[];
      const answer = await call('GET', `/subscriptions/${sub}/dead-letters/${first.id}`);
      expect(answer).toMatchObject({
        status: 200,
        body: {
          id: first.id,
          eventId: 'b-0',
          lastError: 'HTTP 500',
          replayedAt: null,
          event: { specversion: '1.0', id: 'b-0', source: '/even', type: 'order.created', data: { n: 0 } },
        },
      });
      expect(await call('GET', `/subscriptions/${sub}/dead-letters/999999999`)).toMatchObject({
        status: 404,
        body: { code: 'DEAD_LETTER_NOT_FOUND' },
      });
    });

    it('purges only with the subscription id as confirmation, and only what the filter names', async () => {
      for (const query of ['', '?confirm=yes', `?confirm=${randomUUID()}`]) {
        const answer = await call('DELETE', `/subscriptions/${sub}/dead-letters${query}`);
        expect({ query, status: answer.status, code: answer.body.code }).toEqual({
          query,
          status: 400,
          code: 'CONFIRMATION_REQUIRED',
        });
      }
      expect(await call('DELETE', `/subscriptions/${sub}/dead-letters?confirm=${sub}&type=order.paid`)).toEqual({
        status: 200,
        body: { deleted: 6 },
      });
      const left = (await call('GET', `/subscriptions/${sub}/dead-letters`)).body.items as { eventId: string }[];
      expect(left.map((l) => l.eventId)).toEqual(['b-0', 'b-1', 'b-2', 'b-3', 'b-4', 'b-5']);
      expect(await call('DELETE', `/subscriptions/${sub}/dead-letters?confirm=${sub}`)).toEqual({
        status: 200,
        body: { deleted: 6 },
      });
      expect((await call('GET', `/subscriptions/${sub}/dead-letters`)).body.items).toEqual([]);
    });
  });

  describe('replay', () => {
    let sub: string;
    const published = new Set<string>();

    beforeAll(async () => {
      receiver.status = () => 500;
      sub = await subscribe(receiver.url!);
      // Another subscriber of the same topic gets every event at once: a replay must not reach it again.
      await subscribe(bystander.url!);
      bystander.requests.length = 0;
      for (let n = 0; n < 50; n++) {
        const id = `r-${n}`;
        const response = await fetch(`${instance.url}/events/publish?topic=${topic}`, {
          method: 'POST',
          headers: { 'content-type': 'application/cloudevents+json' },
          body: JSON.stringify({
            specversion: '1.0',
            id,
            source: '/replay',
            type: 'replay.n',
            // A key per event, spread over the topic's 8 partitions: a partition's events are dead-lettered one after
            // another (ordered delivery, each second attempt about half a second after the first), so more
            // partitions write the 50 letters sooner; this spec's cases are about the letters, not their order.
            partitionkey: `k${n}`,
            data: { n },
          }),
        });
        expect(response.status).toBe(202);
        published.add(id);
      }
      await waitFor(
        '50 dead letters',
        async () => {
          const answer = await call('GET', `/subscriptions/${sub}/dead-letters?limit=100`);
          return (answer.body.items as unknown[]).length === 50 || undefined;
        },
        { timeoutMs: 60000, intervalMs: 250 },
      );
      await waitFor('the bystander to get all 50', () => new Set(okAt(bystander, published)).size === 50);
    });

    const replay = async (body: unknown) => {
      const answer = await call('POST', `/subscriptions/${sub}/dead-letters/replays`, body);
      expect(answer.status).toBe(202);
      replayIds.push(answer.body.replayId as string);
      return answer.body as { replayId: string; workflowId: string; total: number };
    };
    const finished = (replayId: string) =>
      waitFor(
        `replay ${replayId} to complete`,
        async () => {
          const answer = await call('GET', `/subscriptions/${sub}/dead-letters/replays/${replayId}`);
          return answer.body.state === 'COMPLETED' ? answer.body : undefined;
        },
        { timeoutMs: 60000, intervalMs: 250 },
      );

    it('delivers each dead letter once to its own subscription, and a second replay nothing', async () => {
      const attemptsBefore = receiver.requests.length;
      expect(attemptsBefore).toBe(100);
      receiver.status = () => 200;
      const bystanderBefore = bystander.requests.length;

      const first = await replay({ filter: {}, ratePerSecond: 20 });
      expect(first).toMatchObject({ total: 50, workflowId: `dlq-replay/${first.replayId}` });
      const firstDone = await finished(first.replayId);
      const replayed = receiver.requests.slice(attemptsBefore).map((r) => String(r.headers['ce-id']));
      expect(replayed).toHaveLength(50);
      expect(new Set(replayed)).toEqual(published);
      // Same webhook-id as the original attempts: a sink can tell a replay of a delivery it has seen.
      const original = receiver.requests.find((r) => r.headers['ce-id'] === 'r-7')!;
      const again = receiver.requests.slice(attemptsBefore).find((r) => r.headers['ce-id'] === 'r-7')!;
      expect(again.headers['webhook-id']).toBe(original.headers['webhook-id']);
      expect(bystander.requests.length).toBe(bystanderBefore);

      // The same letters replayed again: nothing is sent.
      const second = await replay({ filter: {} });
      const secondDone = await finished(second.replayId);
      expect(receiver.requests.length).toBe(attemptsBefore + 50);

      expect(firstDone).toMatchObject({
        state: 'COMPLETED',
        total: 50,
        replayed: 50,
        failed: 0,
        skipped: 0,
        remaining: 0,
      });
      expect(secondDone).toMatchObject({ state: 'COMPLETED', total: 0, replayed: 0, remaining: 0 });
      // The letters are marked replayed: none left as dead letters, all listed as replayed.
      expect((await call('GET', `/subscriptions/${sub}/dead-letters`)).body.items).toEqual([]);
      const marked = (await call('GET', `/subscriptions/${sub}/dead-letters?state=replayed&limit=100`)).body.items as {
        replayId: string;
      }[];
      expect(marked).toHaveLength(50);
      expect(new Set(marked.map((m) => m.replayId))).toEqual(new Set([first.replayId]));
    });

    it('keeps a letter whose replay fails as a dead letter with its new error, counted as failed', async () => {
      const [one] = (await call('GET', `/subscriptions/${sub}/dead-letters?state=replayed&limit=1`)).body.items as {
        id: string;
      }[];
      // Back to a dead letter (as if it had never been replayed), then replayed by id into a sink that now fails.
      await instance.deps.db.query(`UPDATE dead_letters SET replayed_at = NULL, replay_id = NULL WHERE id = $1`, [
        one.id,
      ]);
      receiver.status = () => 503;
      const started = await replay({ ids: [one.id] });
      expect(started.total).toBe(1);
      expect(await finished(started.replayId)).toMatchObject({ total: 1, replayed: 0, failed: 1 });
      const after = await call('GET', `/subscriptions/${sub}/dead-letters/${one.id}`);
      expect(after.body).toMatchObject({ replayedAt: null, lastError: 'HTTP 503', attempts: 3 });
      expect(await call('POST', `/subscriptions/${sub}/dead-letters/replays`, { ids: ['999999999'] })).toMatchObject({
        status: 404,
        body: { code: 'DEAD_LETTER_NOT_FOUND', missing: ['999999999'] },
      });
      expect(
        await call('POST', `/subscriptions/${sub}/dead-letters/replays`, { ids: [one.id], filter: {} }),
      ).toMatchObject({ status: 400, body: { field: 'ids' } });
      expect(
        await call('POST', `/subscriptions/${sub}/dead-letters/replays`, { filter: {}, ratePerSecond: 5000 }),
      ).toMatchObject({
        status: 400,
        body: { field: 'ratePerSecond' },
      });
    });

    it('cancels a running replay after its batch in flight', async () => {
      await instance.deps.db.query(
        `UPDATE dead_letters SET replayed_at = NULL, replay_id = NULL WHERE subscription_id = $1`,
        [sub],
      );
      receiver.status = () => 200;
      const before = receiver.requests.length;
      const started = await replay({ filter: {}, ratePerSecond: 2 });
      await waitFor('the replay to send its first letter', () => receiver.requests.length > before);
      const cancelled = await call('DELETE', `/subscriptions/${sub}/dead-letters/replays/${started.replayId}`);
      expect(cancelled).toMatchObject({ status: 202, body: { cancelRequested: true } });
      const ended = await waitFor(
        'the replay to stop',
        async () => {
          const answer = await call('GET', `/subscriptions/${sub}/dead-letters/replays/${started.replayId}`);
          return answer.body.state === 'CANCELLED' ? answer.body : undefined;
        },
        { timeoutMs: 60000, intervalMs: 250 },
      );
      // Rate 2/s: a batch is 4 letters; it stopped after the one in flight when the cancel came (the first, or
      // the second on a slow machine), and every letter it delivered is marked.
      expect(ended.replayed).toBeLessThanOrEqual(8);
      expect(receiver.requests.length - before).toBe(ended.replayed);
      const marked = (await call('GET', `/subscriptions/${sub}/dead-letters?state=replayed&limit=100`)).body
        .items as unknown[];
      expect(marked).toHaveLength(ended.replayed as number);
      expect(await call('GET', `/subscriptions/${sub}/dead-letters/replays/${randomUUID()}`)).toMatchObject({
        status: 404,
        body: { code: 'REPLAY_NOT_FOUND' },
      });
    }, 120000);

    it('stops at once when cancelled from the Temporal UI, lets its claims go, and every letter it delivered is marked', async () => {
      await instance.deps.db.query(
        `UPDATE dead_letters SET replayed_at = NULL, replay_id = NULL, replay_claimed_until = NULL WHERE subscription_id = $1`,
        [sub],
      );
      receiver.status = () => 200;
      const before = receiver.requests.length;
      const started = await replay({ filter: {}, ratePerSecond: 5 });
      await waitFor('the replay to send its first letter', () => receiver.requests.length > before);
      await instance.deps.temporal.client.workflow.getHandle(started.workflowId).cancel();
      const ended = await waitFor(
        'the replay to end cancelled',
        async () => {
          const answer = await call('GET', `/subscriptions/${sub}/dead-letters/replays/${started.replayId}`);
          return answer.body.state === 'CANCELLED' ? answer.body : undefined;
        },
        { timeoutMs: 60000, intervalMs: 250 },
      );
      expect(ended.remaining).toBe(0);
      // The batch in flight hears of it at its next heartbeat, lets its unsent letters go, and stops.
      await waitFor(
        'no letter left claimed',
        async () => {
          const [row] = await instance.deps.db.query(
            `SELECT count(*)::int AS n FROM dead_letters WHERE subscription_id = $1 AND replay_claimed_until IS NOT NULL`,
            [sub],
          );
          return row.n === 0;
        },
        { timeoutMs: 60000, intervalMs: 250 },
      );
      const delivered = receiver.requests.length - before;
      const marked = (await call('GET', `/subscriptions/${sub}/dead-letters?state=replayed&limit=100`)).body
        .items as unknown[];
      expect(marked).toHaveLength(delivered);
      expect(delivered).toBeLessThan(50);
      const dead = (await call('GET', `/subscriptions/${sub}/dead-letters?limit=100`)).body.items as unknown[];
      expect(dead).toHaveLength(50 - delivered);
    }, 180000);
  });

  it('continues a long replay as new, carrying its progress, and ends with every letter replayed once', async () => {
    const sub = await subscribe(bystander.url!);
    const letters = Array.from({ length: 5 }, (_, n) =>
      letter(sub, n, { id: `can-${n}`, source: '/s', type: 't' }, 'HTTP 500'),
    );
    await store.add(letters);
    const before = bystander.requests.length;
    const selection = { filter: {} };
    const scope = await new DeadLetterReplayStore(instance.deps.db).scope(sub, selection);
    const replayId = randomUUID();
    replayIds.push(replayId);
    // Two letters a batch, one batch a run: three runs, chained by continue-as-new.
    const handle = await instance.deps.temporal.client.workflow.start(dlqReplayWorkflow, {
      workflowId: dlqReplayWorkflowIdOf(replayId),
      taskQueue: DEAD_LETTER_TASK_QUEUE,
      args: [
        {
          replayId,
          subscriptionId: sub,
          selection,
          upToId: scope.upToId!,
          total: scope.total,
          ratePerSecond: 100,
          batchSize: 2,
          heartbeatTimeoutMs: 3000,
          requestedAt: new Date().toISOString(),
          batchesPerRun: 1,
        },
      ],
    });
    const result = await handle.result();
    expect(result).toMatchObject({ state: 'COMPLETED', total: 5, replayed: 5, failed: 0, skipped: 0 });
    const firstRun = instance.deps.temporal.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId);
    expect((await firstRun.describe()).status.name).toBe('CONTINUED_AS_NEW');
    const sent = bystander.requests.slice(before).map((r) => String(r.headers['ce-id']));
    expect(sent.sort()).toEqual(['can-0', 'can-1', 'can-2', 'can-3', 'can-4']);
  });

  it('runs retention as the Temporal schedule dlq-retention, which purges letters past it', async () => {
    const client = instance.deps.temporal.client;
    const schedule = client.schedule.getHandle(DLQ_RETENTION_SCHEDULE_ID);
    const described = await schedule.describe();
    expect(described.action).toMatchObject({
      type: 'startWorkflow',
      workflowType: 'dlqRetentionWorkflow',
      taskQueue: 'eventmesh-dead-letters',
      args: [{ retentionDays: 30 }],
    });
    const sub = await subscribe(bystander.url!);
    await store.add([
      letter(sub, 1, { id: 'old', source: '/s', type: 't' }, 'HTTP 500'),
      letter(sub, 2, { id: 'new', source: '/s', type: 't' }, 'HTTP 500'),
    ]);
    await instance.deps.db.query(
      `UPDATE dead_letters SET created_at = now() - interval '31 days' WHERE subscription_id = $1 AND event_id = 'old'`,
      [sub],
    );
    await schedule.trigger();
    await waitFor(
      'the scheduled purge to delete the old letter',
      async () => {
        const items = (await call('GET', `/subscriptions/${sub}/dead-letters`)).body.items as { eventId: string }[];
        return items.length === 1 && items[0].eventId === 'new';
      },
      { timeoutMs: 30000, intervalMs: 250 },
    );
  });
});
