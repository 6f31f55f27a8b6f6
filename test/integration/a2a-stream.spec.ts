import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentCard, Message, SendMessageRequest, StreamResponse, Task, TaskState } from '@a2a-js/sdk';
import { Client, ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import {
  InvalidAgentResponseError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { A2ABroker } from '@libs/a2a';
import { endTaskWorkflows } from '../support/a2a-tasks';
import { EchoAgent, textOf } from '../support/a2a-echo-agent';
import { testConfig, uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';
import { HeaderTenantFilter, headerTenantGate, stockClientOf, tenantFetch } from '../support/header-tenant-gate';
import { LoggingAuditSink, SecurityGate, TenantQuotaFilter } from '@libs/security';
import { createDataSource, QuotaUsageStore, TenantQuotaStore } from '@libs/storage';

interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
  /** A comment line (`: keep-alive`). */
  comment?: string;
}

/** The events and comments of an SSE response, as they arrive (a raw reader: the resume is the test's own). */
async function* sseOf(response: Response): AsyncGenerator<SseEvent> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let current: SseEvent = {};
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        if (line === '') {
          if (current.data !== undefined) yield current;
          current = {};
        } else if (line.startsWith(':')) yield { comment: line.slice(1).trim() };
        else if (line.startsWith('id:')) current.id = line.slice(3).trim();
        else if (line.startsWith('event:')) current.event = line.slice(6).trim();
        else if (line.startsWith('data:'))
          current.data = (current.data === undefined ? '' : `${current.data}\n`) + line.slice(5).trim();
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/**
 * A2A streaming (docs/a2a.md, "Streaming and resume") on real Postgres, Kafka and Temporal: instance A (gateway and
 * worker) takes the tasks and runs their workflows; instance B (a gateway only, at most 2 streams, heartbeats every
 * 300 ms) never took any, and streams them from their event logs just as well. The agent is a mesh subscriber the
 * test plays itself (its updates posted to the mesh), so the task's status updates and artifacts are exactly known;
 * one case relays a URL agent (the SDK's own server pieces) through the relay's GetTask following.
 */
describe('A2A streams (SSE from any instance, resumable)', () => {
  const suffix = randomUUID().slice(0, 8);
  const [tenant, other] = [`a2a-s-${suffix}`, `a2a-s2-${suffix}`];
  const env = {
    EVENTMESH_KAFKA_TOPICS: uniqueTopic('a2a-s'),
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
    EVENTMESH_AGENTS_CALL_TIMEOUT_MS: '5000',
    EVENTMESH_AGENTS_TASK_TIMEOUT_MS: '60000',
    EVENTMESH_AGENTS_STREAM_POLL_MS: '50',
    EVENTMESH_AGENTS_HEARTBEAT_TTL_MS: '600000',
  };
  const gateOf = (name: string) => headerTenantGate(name);
  const gates = { ingress: gateOf('ingress'), admin: gateOf('admin'), close: async () => undefined };
  // Instance A's ingress gate also holds tenants to their quotas (the real filter; only the quota tenant has one).
  const streamer = `a2a-s-q-${suffix}`;
  let quota: TenantQuotaFilter;
  let closeQuotaDb: (() => Promise<void>) | undefined;
  const echo = new EchoAgent();
  /** A URL agent whose card says it streams: the mesh sends it tasks on its stream and follows them there. */
  const streamingAgent = new EchoAgent({ streaming: true });
  let a: RunningInstance;
  let b: RunningInstance;

  beforeAll(async () => {
    await echo.start();
    await streamingAgent.start();
    const aConfig = testConfig({ ...env, EVENTMESH_INSTANCE_ID: `a2a-s-a-${suffix}` });
    const quotaDb = createDataSource(aConfig.postgres, `a2a-s-quota-${suffix}`);
    await quotaDb.initialize();
    closeQuotaDb = () => quotaDb.destroy();
    await new TenantQuotaStore(quotaDb).put(streamer, {
      eventsPerSecond: null,
      bytesPerSecond: null,
      burstSeconds: null,
      subscriptions: null,
      streamConnections: 1,
    });
    const unlimited = {
      eventsPerSecond: Number.MAX_SAFE_INTEGER,
      bytesPerSecond: Number.MAX_SAFE_INTEGER,
      burstSeconds: 1,
      streamConnections: 1_000_000,
      subscriptions: 1_000_000,
    };
    quota = new TenantQuotaFilter(new TenantQuotaStore(quotaDb), new QuotaUsageStore(quotaDb), {
      instanceId: aConfig.instance.id,
      defaults: unlimited,
      syncMs: 200,
      refreshMs: 200,
    });
    const ingress = new SecurityGate({
      name: 'ingress',
      filters: [new HeaderTenantFilter(), quota],
      failClosed: true,
      audit: new LoggingAuditSink(),
      auditAllows: false,
    });
    a = await startInstance(aConfig, { roles: ['gateway', 'worker'], gates: { ...gates, ingress } });
    b = await startInstance(
      testConfig({
        ...env,
        EVENTMESH_INSTANCE_ID: `a2a-s-b-${suffix}`,
        EVENTMESH_AGENTS_MAX_STREAMS: '2',
        EVENTMESH_AGENTS_STREAM_HEARTBEAT_MS: '300',
      }),
      { roles: ['gateway'], gates },
    );
    const card = { ...echo.card(), name: 'steps', supportedInterfaces: [] };
    expect((await call(a, 'PUT', '/a2a/agents/steps?style=subscriber', card)).status).toBe(201);
    expect((await call(a, 'PUT', '/a2a/agents/steps?style=subscriber', card, other)).status).toBe(201);
    expect((await call(a, 'PUT', '/a2a/agents/echo', echo.card())).status).toBe(201);
    expect((await call(a, 'PUT', '/a2a/agents/streamer', { ...streamingAgent.card(), name: 'streamer' })).status).toBe(
      201,
    );
  });
  afterAll(async () => {
    await endTaskWorkflows([tenant, other]);
    await b?.close();
    await a?.close();
    await quota?.close();
    await closeQuotaDb?.();
    await echo.close();
    await streamingAgent.close();
  });

  const call = async (
    on: RunningInstance,
    method: string,
    path: string,
    body?: unknown,
    as = tenant,
  ): Promise<{ status: number; body: Record<string, unknown> | null }> => {
    const response = await fetch(`${on.url}${path}`, {
      method,
      headers: { 'x-test-tenant': as, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) };
  };
  const fetchAs = tenantFetch;
  const cardUrl = (on: RunningInstance, agent: string) => `${on.url}/a2a/agents/${agent}/.well-known/agent-card.json`;
  /** The stock v1.0 JSON-RPC client of an agent at an instance, built from the card URL alone. */
  const clientOf = (on: RunningInstance, agent = 'steps', as = tenant): Promise<Client> =>
    stockClientOf(cardUrl(on, agent), as);
  const restClientOf = (on: RunningInstance, agent = 'steps'): Promise<Client> =>
    stockClientOf(cardUrl(on, agent), tenant, 'rest');
  /** The stock v0.3 client: the card's v0.3 interface, the SDK's compat transport. */
  const legacyClientOf = async (on: RunningInstance, agent = 'steps'): Promise<Client> => {
    const card = AgentCard.fromJSON(await (await fetchAs(tenant)(cardUrl(on, agent))).json());
    card.supportedInterfaces = card.supportedInterfaces.filter((i) => i.protocolVersion === '0.3');
    return new ClientFactory({
      transports: [new JsonRpcTransportFactory({ fetchImpl: fetchAs(tenant), legacyCompat: { enabled: true } })],
    }).createFromAgentCard(card);
  };
  const send = (text: string, configuration: Record<string, unknown> = {}): SendMessageRequest =>
    SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
      configuration,
    });
  const agentText = (text: string) => ({ messageId: randomUUID(), role: 'ROLE_AGENT', parts: [{ text }] });

  /** What the agent does with a task: two status updates while working, an artifact, then completes. */
  const STEPS = [
    { state: 'working', message: agentText('step 1') },
    { state: 'working', message: agentText('step 2') },
    { state: 'working', artifacts: [{ artifactId: 'result', name: 'result', parts: [{ text: 'forty-two' }] }] },
    { state: 'completed', message: agentText('done') },
  ];
  const update = async (taskId: string, body: unknown) =>
    expect((await call(a, 'POST', `/a2a/agents/steps/tasks/${taskId}/updates`, body)).status).toBe(200);
  const work = async (taskId: string, steps = STEPS) => {
    for (const step of steps) await update(taskId, step);
  };
  /** A stream event as `kind:detail`: `task:submitted`, `status:working:step 1`, `artifact:forty-two`, ... */
  const describe_ = (e: StreamResponse): string => {
    const p = e.payload;
    if (p?.$case === 'task') return `task:${TaskState[p.value.status!.state]}`;
    if (p?.$case === 'statusUpdate')
      return ['status', TaskState[p.value.status!.state], textOf(p.value.status?.message)].filter(Boolean).join(':');
    if (p?.$case === 'artifactUpdate') return `artifact:${textOf({ parts: p.value.artifact!.parts } as Message)}`;
    return `message:${textOf(p?.value)}`;
  };
  const EXPECTED_AFTER_SUBMIT = [
    'status:TASK_STATE_WORKING:step 1',
    'status:TASK_STATE_WORKING:step 2',
    'artifact:forty-two',
    'status:TASK_STATE_COMPLETED:done',
  ];
  /** The task's log as stored: seq and kind. */
  const logOf = async (taskId: string): Promise<{ seq: number; kind: string; payload: Record<string, unknown> }[]> =>
    a.deps.db.query('SELECT seq, kind, payload FROM a2a_task_events WHERE task_id = $1 ORDER BY seq', [taskId]);
  const submitted = async (client: Client): Promise<string> => {
    const task = await client.sendMessage(send('job', { returnImmediately: true }));
    return (task as Task).id;
  };
  const streamsOf = (on: RunningInstance) => on.app!.get(A2ABroker).streams;
  /** A raw JSON-RPC SubscribeToTask (v1.0) of B, with a Last-Event-ID when given. */
  const subscribeRaw = (taskId: string, lastEventId?: string, signal?: AbortSignal) =>
    fetch(`${b.url}/a2a/agents/steps/rpc`, {
      method: 'POST',
      headers: {
        'x-test-tenant': tenant,
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'a2a-version': '1.0',
        ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }),
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'SubscribeToTask', params: { id: taskId } }),
      signal,
    });

  /**
   * A stream of B (`subscribe`) of a task at its first step: two events taken (step 2 posted after the first), then
   * the client goes away and B ends the stream; the task moves on to completion meanwhile; then a stream resumed
   * with `Last-Event-ID` of the last event taken, to its end.
   */
  const disconnectAndResume = async (
    taskId: string,
    subscribe: (lastEventId?: string, signal?: AbortSignal) => Promise<Response>,
  ) => {
    await update(taskId, STEPS[0]);
    const aborted = new AbortController();
    const seen: SseEvent[] = [];
    const response = await subscribe(undefined, aborted.signal);
    expect([response.status, response.headers.get('content-type')]).toEqual([200, 'text/event-stream']);
    for await (const e of sseOf(response)) {
      if (e.data === undefined) continue;
      seen.push(e);
      if (seen.length === 1) await update(taskId, STEPS[1]);
      if (seen.length === 2) break;
    }
    aborted.abort();
    // The server ends the stream it held (no poller left behind).
    await waitFor(
      "B's stream closed after the disconnect",
      () => streamsOf(b).stats().open === 0 && streamsOf(b).stats().waiting === 0,
    );
    // While the client is away, the task moves on and completes.
    await work(taskId, STEPS.slice(2));
    const resumed: SseEvent[] = [];
    for await (const e of sseOf(await subscribe(seen[seen.length - 1].id))) if (e.data !== undefined) resumed.push(e);
    return { seen, resumed };
  };

  it('SendStreamingMessage (stock client, v1.0): the task, each status update and the artifact, to completion, as logged', async () => {
    const client = await clientOf(a);
    const stream = client.sendMessageStream(send('job'));
    const first = await stream.next();
    expect(first.done).toBe(false);
    const task = (first.value as StreamResponse).payload;
    expect(task?.$case).toBe('task');
    const taskId = (task!.value as Task).id;
    await work(taskId);
    const rest: StreamResponse[] = [];
    for await (const event of stream) rest.push(event);
    expect([describe_(first.value as StreamResponse), ...rest.map(describe_)]).toEqual([
      'task:TASK_STATE_SUBMITTED',
      ...EXPECTED_AFTER_SUBMIT,
    ]);
    expect((await logOf(taskId)).map((e) => `${e.seq}:${e.kind}`)).toEqual([
      '1:task',
      '2:status-update',
      '3:status-update',
      '4:artifact-update',
      '5:status-update',
    ]);
  });

  it('SubscribeToTask from instance B, which did not take the task: the snapshot first, then the updates (v1.0, REST and v0.3 stock clients)', async () => {
    for (const clientFor of [clientOf, restClientOf, legacyClientOf]) {
      const taskId = await submitted(await clientOf(a));
      await update(taskId, STEPS[0]);
      const stream = (await clientFor(b, 'steps')).resubscribeTask({ tenant: '', id: taskId });
      const first = await stream.next();
      // The task as it is when subscribed: working, at step 1 (its log's first two events).
      expect(describe_(first.value as StreamResponse)).toBe('task:TASK_STATE_WORKING');
      await work(taskId, STEPS.slice(1));
      const rest: string[] = [];
      for await (const event of stream) rest.push(describe_(event));
      expect(rest).toEqual(EXPECTED_AFTER_SUBMIT.slice(1));
    }
    await waitFor("B's streams ended", () => streamsOf(b).stats().open === 0 && streamsOf(b).stats().waiting === 0);
  });

  it("message:stream on the REST binding and message/stream (v0.3) of instance B stream a task that instance A's worker runs", async () => {
    for (const clientFor of [restClientOf, legacyClientOf]) {
      const stream = (await clientFor(b, 'steps')).sendMessageStream(send('job'));
      const first = await stream.next();
      const taskId = ((first.value as StreamResponse).payload!.value as Task).id;
      await work(taskId);
      const rest: string[] = [];
      for await (const event of stream) rest.push(describe_(event));
      expect([describe_(first.value as StreamResponse), ...rest]).toEqual([
        'task:TASK_STATE_SUBMITTED',
        ...EXPECTED_AFTER_SUBMIT,
      ]);
    }
  });

  it("relays a URL agent's task to the stream's end: the last events are the artifact and the completion", async () => {
    const events: string[] = [];
    for await (const event of (await clientOf(b, 'echo')).sendMessageStream(send('echo:streamed')))
      events.push(describe_(event));
    expect(events[0]).toBe('task:TASK_STATE_SUBMITTED');
    expect(events.slice(-2)).toEqual(['artifact:streamed', 'status:TASK_STATE_COMPLETED:echoed streamed']);
  });

  it("follows a URL agent that streams on its own stream: each status it reports (two at once, then one after the stream is cut and subscribed again), the artifact's chunks appended; never GetTask", async () => {
    const client = await clientOf(b, 'streamer');
    const taskId = ((await client.sendMessage(send('steps:s1', { returnImmediately: true }))) as Task).id;
    // The first attempt follows the agent's stream for a moment (1 s) and leaves it to the delivery after it (the
    // same worker: A's); the stream is then cut, and the delivery subscribes again.
    await waitFor('the agent to hold the task', () => streamingAgent.isHeld('s1'), { timeoutMs: 60000 });
    // The first attempt answered (the delivery after it is scheduled), leaving the stream: then it is cut.
    const workflow = a.deps.temporal.client.workflow.getHandle(`a2a-task/${taskId}`);
    await waitFor('the delivery after the first attempt scheduled', async () =>
      (await workflow.fetchHistory()).events?.some(
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverTask',
      ),
    );
    streamingAgent.dropConnections();
    await waitFor('a SubscribeToTask after the cut', () => streamingAgent.methods.includes('SubscribeToTask'), {
      timeoutMs: 60000,
    });
    expect(streamingAgent.release('s1')).toBe(true);
    const done = await waitFor(
      'the task to complete',
      async () => {
        const task = await client.getTask({ tenant: '', id: taskId, historyLength: undefined });
        return task.status?.state === TaskState.TASK_STATE_COMPLETED && task;
      },
      { timeoutMs: 60000 },
    );
    expect(textOf(done.status?.message)).toBe('done');
    expect(done.artifacts.map((x) => x.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')))).toEqual(
      [['forty-', 'two']],
    );
    // Every status the agent reported is in the task's log, in order: step 1 and step 2 came within a microsecond of
    // each other, which no GetTask would have told apart.
    const statuses = (await logOf(taskId))
      .filter((e) => e.kind === 'status-update')
      .map((e) =>
        ((e.payload.status as { message?: { parts?: { text?: string }[] } }).message?.parts ?? [])
          .map((p) => p.text)
          .join(''),
      );
    expect(statuses.filter(Boolean)).toEqual(['step 1', 'step 2', 'step 3', 'done']);
    expect(streamingAgent.methods).toEqual(['SendStreamingMessage', 'SubscribeToTask']);
  }, 240000);

  it('fails at once (-32006 to a blocking send), and sends once, a task for an agent whose card says it streams but that answers the send with JSON', async () => {
    // An agent that answers every call with a JSON-RPC result as JSON, never an event stream.
    const calls: string[] = [];
    const server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      request.on('end', () => {
        const rpc = JSON.parse(body) as { id: number; method: string };
        calls.push(rpc.method);
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id: rpc.id,
            result: { task: { id: randomUUID(), contextId: randomUUID(), status: { state: 'TASK_STATE_WORKING' } } },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const card = {
        ...echo.card(),
        name: 'json-streamer',
        supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
        capabilities: { streaming: true, pushNotifications: false },
      };
      expect((await call(a, 'PUT', '/a2a/agents/json-streamer', card)).status).toBe(201);
      const client = await clientOf(a, 'json-streamer');
      // A blocking send: -32006, naming the task, which failed saying why.
      const error = await client.sendMessage(send('hello')).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InvalidAgentResponseError);
      expect((error as Error).message).toContain('card says it streams');
      const taskId = /task ([0-9a-f-]{36}), failed/.exec((error as Error).message)?.[1];
      const task = await client.getTask({ tenant: '', id: taskId!, historyLength: undefined });
      expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
      expect(textOf(task.status?.message)).toContain('card says it streams');
      // A returnImmediately send: the task, which fails behind it.
      const later = (await client.sendMessage(send('hello again', { returnImmediately: true }))) as Task;
      await waitFor(
        'the task failed',
        async () =>
          (await client.getTask({ tenant: '', id: later.id, historyLength: undefined })).status?.state ===
          TaskState.TASK_STATE_FAILED,
      );
      expect(calls).toEqual(['SendStreamingMessage', 'SendStreamingMessage']);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("a cancel of a task followed on the agent's stream is made at the agent (CancelTask) and recorded", async () => {
    const client = await clientOf(a, 'streamer');
    const calls = streamingAgent.methods.length;
    const taskId = ((await client.sendMessage(send('steps:s2', { returnImmediately: true }))) as Task).id;
    await waitFor('the agent to hold the task', () => streamingAgent.isHeld('s2'), { timeoutMs: 60000 });
    const canceled = await client.cancelTask({ tenant: '', id: taskId, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect(streamingAgent.canceled.size).toBe(1);
    expect(streamingAgent.methods.slice(calls).filter((m) => m !== 'SubscribeToTask')).toEqual([
      'SendStreamingMessage',
      'CancelTask',
    ]);
    expect((await client.getTask({ tenant: '', id: taskId, historyLength: undefined })).status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
  }, 120000);

  it('a client that disconnects mid-stream and reconnects with Last-Event-ID gets the rest: no gap, no repeat', async () => {
    const taskId = await submitted(await clientOf(a));
    const { seen, resumed } = await disconnectAndResume(taskId, (lastEventId, signal) =>
      subscribeRaw(taskId, lastEventId, signal),
    );
    const log = await logOf(taskId);
    // The snapshot's id is the seq of the last event it holds (2: created, step 1); then 3 (step 2); resumed after 3.
    expect(seen.map((e) => Number(e.id))).toEqual([2, 3]);
    expect(resumed.map((e) => Number(e.id))).toEqual([4, 5]);
    expect(log.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    // Each event resumed is the logged one, as a JSON-RPC answer of the request.
    for (const e of resumed) {
      const answer = JSON.parse(e.data!) as { id: number; result: Record<string, unknown> };
      const logged = log.find((l) => l.seq === Number(e.id))!;
      expect(answer.id).toBe(7);
      // (Through the SDK's codec, which leaves out default values such as `append: false`.)
      const wire = StreamResponse.toJSON(
        StreamResponse.fromJSON(
          logged.kind === 'artifact-update' ? { artifactUpdate: logged.payload } : { statusUpdate: logged.payload },
        ),
      );
      expect(answer.result).toEqual(wire);
    }
    // From the start (0): the whole log again; after the last event of a completed task: nothing left, refused.
    const all: number[] = [];
    for await (const e of sseOf(await subscribeRaw(taskId, '0'))) if (e.id) all.push(Number(e.id));
    expect(all).toEqual([1, 2, 3, 4, 5]);
    // Refused before its first event: a stream of one `event: error` whose data is the JSON-RPC error.
    const refusal = async (lastEventId: string) => {
      const events: SseEvent[] = [];
      for await (const e of sseOf(await subscribeRaw(taskId, lastEventId))) events.push(e);
      expect(events.map((e) => e.event)).toEqual(['error']);
      return (JSON.parse(events[0].data!) as { error: { code: number } }).error.code;
    };
    expect(await refusal('5')).toBe(-32004);
    expect(await refusal('6')).toBe(-32602);
    expect(await refusal('x')).toBe(-32602);
  });

  it('v0.3 REST :subscribe carries the same event ids and resumes with Last-Event-ID: no gap, no repeat', async () => {
    const taskId = await submitted(await clientOf(a));
    const { seen, resumed } = await disconnectAndResume(taskId, (lastEventId, signal) =>
      fetch(`${b.url}/a2a/agents/steps/rest/v1/tasks/${taskId}:subscribe`, {
        headers: {
          'x-test-tenant': tenant,
          accept: 'text/event-stream',
          ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }),
        },
        signal,
      }),
    );
    // The ids of the v1.0 bindings (the log's seqs), on the v0.3 binding's events (its StreamResponse JSON).
    expect(seen.map((e) => Number(e.id))).toEqual([2, 3]);
    expect(resumed.map((e) => Number(e.id))).toEqual([4, 5]);
    const kinds = (events: SseEvent[]) =>
      events.map((e) => Object.keys(JSON.parse(e.data!) as Record<string, unknown>));
    expect(kinds(seen)).toEqual([['task'], ['statusUpdate']]);
    expect(kinds(resumed)).toEqual([['artifactUpdate'], ['statusUpdate']]);
    expect(JSON.stringify(JSON.parse(resumed[1].data!))).toContain('TASK_STATE_COMPLETED');
  });

  it("refuses a stream of an unknown task and of another tenant's task (TaskNotFound), and SubscribeToTask of a terminal task (UnsupportedOperation)", async () => {
    const client = await clientOf(b);
    const drain = async (stream: AsyncGenerator<StreamResponse>) => {
      for await (const _ of stream) void _;
    };
    // A subscribe refused before its first event is a stream of one error event (as the Python SDK's server answers
    // it; the TCK reads nothing but a stream): the stock v1.0 client throws with the typed error as its cause.
    await expect(drain(client.resubscribeTask({ tenant: '', id: randomUUID() }))).rejects.toMatchObject({
      cause: expect.any(TaskNotFoundError),
    });
    const theirs = await submitted(await clientOf(a, 'steps', other));
    await expect(drain(client.resubscribeTask({ tenant: '', id: theirs }))).rejects.toMatchObject({
      cause: expect.any(TaskNotFoundError),
    });
    await expect(drain((await restClientOf(b)).resubscribeTask({ tenant: '', id: theirs }))).rejects.toBeInstanceOf(
      TaskNotFoundError,
    );
    // v0.3's tasks/resubscribe refused before its first event is a stream of one error event (as the JS SDK's server
    // answers it; the Python SDK's v0.3 client reads nothing but a stream): the stock client throws with the error.
    await expect(drain((await legacyClientOf(b)).resubscribeTask({ tenant: '', id: theirs }))).rejects.toMatchObject({
      cause: expect.any(TaskNotFoundError),
    });
    const done = await submitted(await clientOf(a));
    await work(done);
    await expect(drain(client.resubscribeTask({ tenant: '', id: done }))).rejects.toMatchObject({
      cause: expect.any(UnsupportedOperationError),
    });
    // v0.3 names with the v1.0 header, and v1.0 names with 0.3, are unknown methods (JSON answers; a v1.0 name
    // without the header is v1.0); a subscribe (v1.0 or v0.3) of a terminal or unknown task, a stream of one `event: error` whatever the client accepts.
    const raw = async (method: string, version?: string, id = done) => {
      const response = await fetch(`${b.url}/a2a/agents/steps/rpc`, {
        method: 'POST',
        headers: {
          'x-test-tenant': tenant,
          'content-type': 'application/json',
          ...(version ? { 'a2a-version': version } : {}),
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { id } }),
      });
      if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream'))
        return ['json', ((await response.json()) as { error: { code: number } }).error.code];
      const events: SseEvent[] = [];
      for await (const e of sseOf(response)) events.push(e);
      const errors = events.map((e) => [e.event, (JSON.parse(e.data!) as { error: { code: number } }).error.code]);
      return ['stream', ...errors];
    };
    expect(await raw('tasks/resubscribe', '1.0')).toEqual(['json', -32601]);
    expect(await raw('SubscribeToTask', '0.3')).toEqual(['json', -32601]);
    expect(await raw('SubscribeToTask')).toEqual(['stream', ['error', -32004]]);
    expect(await raw('SubscribeToTask', '1.0', randomUUID())).toEqual(['stream', ['error', -32001]]);
    expect(await raw('SubscribeToTask', '1.0')).toEqual(['stream', ['error', -32004]]);
    expect(await raw('tasks/resubscribe')).toEqual(['stream', ['error', -32004]]);
    expect(await raw('tasks/resubscribe', undefined, randomUUID())).toEqual(['stream', ['error', -32001]]);
  });

  /**
   * A cancel and the agent's completion sent at the same moment, each to another instance (the cancel through the
   * stock client on B, the agent's update on A, 0 to 156 ms after it), over 40 tasks (both orders seen): whichever wins, both instances read the same
   * outcome, the loser is refused (409 for the update, TaskNotCancelableError for the cancel), the task's log has
   * exactly one terminal status and nothing after it, and its workflow ended in that state.
   */
  it('a cancel racing the completion, on two instances at once, ends one way everywhere; the loser is refused', async () => {
    const [onA, onB] = [await clientOf(a), await clientOf(b)];
    const outcomes: Record<string, number> = {};
    const terminal = new Set([
      'TASK_STATE_COMPLETED',
      'TASK_STATE_CANCELED',
      'TASK_STATE_FAILED',
      'TASK_STATE_REJECTED',
    ]);
    for (let i = 0; i < 40; i++) {
      const task = (await onA.sendMessage(send(`race ${i}`, { returnImmediately: true }))) as Task;
      expect((await call(b, 'POST', `/a2a/agents/steps/tasks/${task.id}/updates`, { state: 'working' })).status).toBe(
        200,
      );
      const [cancel, update] = await Promise.all([
        onB.cancelTask({ tenant: '', id: task.id, metadata: undefined }).then(
          (t) => ({ state: t.status?.state, error: undefined }),
          (e: unknown) => ({ state: undefined, error: e }),
        ),
        // The completion sent 0 to 156 ms after the cancel, 4 ms later task by task, so that both orders and the moments
        // in between are tried (the cancel takes a Temporal update, tens of ms here; the completion a compare-and-set).
        sleep(i * 4).then(() =>
          call(a, 'POST', `/a2a/agents/steps/tasks/${task.id}/updates`, {
            state: 'TASK_STATE_COMPLETED',
            artifacts: [{ artifactId: randomUUID(), name: 'r', parts: [{ text: `done ${i}` }] }],
          }),
        ),
      ]);
      const result = await a.deps.temporal.client.workflow.getHandle(`a2a-task/${task.id}`).result();
      const [readA, readB] = await Promise.all([
        onA.getTask({ tenant: '', id: task.id, historyLength: undefined }),
        onB.getTask({ tenant: '', id: task.id, historyLength: undefined }),
      ]);
      expect(readB.status?.state).toBe(readA.status?.state);
      if (readA.status?.state === TaskState.TASK_STATE_CANCELED) {
        expect(cancel).toEqual({ state: TaskState.TASK_STATE_CANCELED, error: undefined });
        expect(update).toMatchObject({ status: 409, body: { code: 'ILLEGAL_TRANSITION' } });
        expect(readA.artifacts).toEqual([]);
      } else {
        expect(readA.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(update).toMatchObject({ status: 200, body: { state: 'completed' } });
        expect(cancel.error).toBeInstanceOf(TaskNotCancelableError);
      }
      const state = readA.status!.state === TaskState.TASK_STATE_CANCELED ? 'canceled' : 'completed';
      expect(result).toBe(state);
      const log = (await a.deps.db.query(`SELECT kind, payload FROM a2a_task_events WHERE task_id = $1 ORDER BY seq`, [
        task.id,
      ])) as { kind: string; payload: { status?: { state: string } } }[];
      const ends = log
        .map((e, at) => ({ at, state: e.payload.status?.state }))
        .filter((e) => e.state !== undefined && terminal.has(e.state));
      expect(ends.map((e) => e.state)).toEqual([state === 'canceled' ? 'TASK_STATE_CANCELED' : 'TASK_STATE_COMPLETED']);
      expect(ends[0].at).toBe(log.length - 1);
      outcomes[state] = (outcomes[state] ?? 0) + 1;
    }
    process.stdout.write(`a2a-stream.spec: cancel racing completion over 40 tasks: ${JSON.stringify(outcomes)}\n`);
    // Both orders happened (else one of the branches above was never tried).
    expect([outcomes.completed > 0, outcomes.canceled > 0]).toEqual([true, true]);
  });

  it('sends keep-alive comments on an idle stream, refuses a stream past EVENTMESH_AGENTS_MAX_STREAMS (503), and frees the slots on disconnect', async () => {
    const taskId = await submitted(await clientOf(a));
    const held = [new AbortController(), new AbortController()];
    const first = await subscribeRaw(taskId, undefined, held[0].signal);
    await subscribeRaw(taskId, undefined, held[1].signal);
    const over = await subscribeRaw(taskId);
    expect(over.status).toBe(503);
    expect(over.headers.get('retry-after')).toBe('1');
    expect(await over.json()).toMatchObject({ code: 'OVERLOADED', maxStreams: 2 });
    let comments = 0;
    for await (const e of sseOf(first)) {
      if (e.comment === 'keep-alive') comments++;
      if (comments === 2) break;
    }
    expect(comments).toBe(2);
    for (const h of held) h.abort();
    await waitFor("B's streams freed", () => streamsOf(b).stats().open === 0 && streamsOf(b).stats().waiting === 0);
    const response = await subscribeRaw(taskId);
    expect(response.status).toBe(200);
    await response.body?.cancel();
  });

  it("counts A2A streams against the tenant's stream quota (JSON-RPC and HTTP+JSON); other methods pass while one is held", async () => {
    const card = { ...echo.card(), name: 'steps', supportedInterfaces: [] };
    expect((await call(a, 'PUT', '/a2a/agents/steps?style=subscriber', card, streamer)).status).toBe(201);
    const taskId = await submitted(await clientOf(a, 'steps', streamer));
    const rpc = (method: string, signal?: AbortSignal) =>
      fetch(`${a.url}/a2a/agents/steps/rpc`, {
        method: 'POST',
        headers: { 'x-test-tenant': streamer, 'content-type': 'application/json', 'a2a-version': '1.0' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { id: taskId } }),
        signal,
      });
    const held = new AbortController();
    const first = await rpc('SubscribeToTask', held.signal);
    expect([first.status, first.headers.get('content-type')]).toEqual([
      200,
      expect.stringMatching(/^text\/event-stream/),
    ]);
    const over = await rpc('SubscribeToTask');
    expect(over.status).toBe(429);
    expect(await over.json()).toMatchObject({ code: 'QUOTA_EXCEEDED', quota: 'stream_connections' });
    const overRest = await fetch(`${a.url}/a2a/agents/steps/rest/tasks/${taskId}:subscribe`, {
      method: 'POST',
      headers: { 'x-test-tenant': streamer, 'a2a-version': '1.0' },
    });
    expect(overRest.status).toBe(429);
    expect(await overRest.json()).toMatchObject({ code: 'QUOTA_EXCEEDED', quota: 'stream_connections' });
    const read = await rpc('GetTask');
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ result: { id: taskId } });
    held.abort();
    await waitFor('the stream slot back', async () => {
      const again = new AbortController();
      const response = await rpc('SubscribeToTask', again.signal);
      again.abort();
      return response.status === 200;
    });
  });

  it("appends each change's events in the change's transaction: an append that fails leaves the task unchanged", async () => {
    const tasks = a.app!.get(A2ABroker).tasks;
    const db = a.deps.db;
    const taskId = await submitted(await clientOf(a));
    const before = (await tasks.get(tenant, taskId))!;
    // A trigger that refuses the next event of this task: the append fails after the UPDATE of the task ran.
    await db.query(
      `CREATE OR REPLACE FUNCTION refuse_event_${suffix}() RETURNS trigger AS $$ BEGIN IF NEW.task_id = '${taskId}' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
    );
    await db.query(
      `CREATE TRIGGER refuse_event_${suffix} BEFORE INSERT ON a2a_task_events FOR EACH ROW EXECUTE FUNCTION refuse_event_${suffix}()`,
    );
    try {
      await expect(tasks.transition(before, { state: 'working', statusMessage: agentText('never') })).rejects.toThrow(
        'refused by the test',
      );
      const after = (await tasks.get(tenant, taskId))!;
      expect([after.state, after.version, after.eventSeq]).toEqual([before.state, before.version, before.eventSeq]);
      // A new task whose first event is refused is not created either.
      const id = randomUUID();
      await db.query(
        `CREATE OR REPLACE FUNCTION refuse_event_${suffix}() RETURNS trigger AS $$ BEGIN IF NEW.task_id IN ('${taskId}', '${id}') THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
      );
      await expect(
        tasks.create({ id, tenant, agent: 'steps', contextId: randomUUID(), history: [], metadata: {} }),
      ).rejects.toThrow('refused by the test');
      expect(await tasks.get(tenant, id)).toBeUndefined();
    } finally {
      await db.query(`DROP TRIGGER IF EXISTS refuse_event_${suffix} ON a2a_task_events`);
      await db.query(`DROP FUNCTION IF EXISTS refuse_event_${suffix}()`);
    }
    const applied = await tasks.transition(before, { state: 'working', statusMessage: agentText('now') });
    expect(applied.changed && [applied.task.version, applied.task.eventSeq]).toEqual([
      before.version + 1,
      before.eventSeq + 1,
    ]);
    expect((await logOf(taskId)).map((e) => e.seq)).toEqual([1, 2]);
  });
});
