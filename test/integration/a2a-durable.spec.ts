import { randomUUID } from 'node:crypto';
import { In } from 'typeorm';
import WebSocket from 'ws';
import { Message, SendMessageRequest, StreamResponse, Task, TaskState } from '@a2a-js/sdk';
import { Client } from '@a2a-js/sdk/client';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { eventsTopicOf, requestTopicOf, TASK_POLICY_EXTENSION, taskFromFrame } from '@libs/a2a';
import { frameFromKafkaRecord } from '@libs/frame';
import { PartitionReader } from '@libs/kafka';
import { A2AAgentEntity, A2ATaskEntity } from '@libs/storage';
import { a2aSearchAttributes, a2aTaskWorkflowIdOf } from '../../workflows';
import { EchoAgent, textOf } from '../support/a2a-echo-agent';
import { endTaskWorkflows } from '../support/a2a-tasks';
import { testConfig, uniqueTopic } from '../support/env';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { topicEndOffset } from '../support/topic-offsets';
import { freePort } from '../support/free-port';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';
import { headerTenantGate, stockClientOf } from '../support/header-tenant-gate';

/**
 * The durable core of the A2A broker on a real instance (gateway and worker), Postgres, Kafka and Temporal, through
 * the SDK's stock client: each task is a workflow `a2a-task/<id>` whose request travels on the agent's request
 * topic, a task for an agent that is down waits for it (within the task's timeout, 12 s here), a cancel reaches
 * the agent's running task, and the workflow is found in Temporal by its id and search attributes.
 */
describe('A2A tasks through the mesh (Kafka, Temporal, Postgres)', () => {
  const suffix = randomUUID().slice(0, 8);
  const tenant = `a2a-d-${suffix}`;
  const env = {
    EVENTMESH_KAFKA_TOPICS: uniqueTopic('a2a-d'),
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
    EVENTMESH_AGENTS_CALL_TIMEOUT_MS: '2000',
    EVENTMESH_AGENTS_TASK_TIMEOUT_MS: '12000',
    EVENTMESH_AGENTS_SEND_WAIT_MS: '15000',
    EVENTMESH_AGENTS_HEARTBEAT_TTL_MS: '3000',
  };
  const config = testConfig({ ...env, EVENTMESH_INSTANCE_ID: `a2a-d-${suffix}` });
  const gate = (name: string) => headerTenantGate(name);
  const agent = new EchoAgent();
  const started: EchoAgent[] = [agent];
  let instance: RunningInstance;

  beforeAll(async () => {
    await agent.start();
    instance = await startInstance(config, {
      roles: ['gateway', 'worker'],
      gates: { ingress: gate('ingress'), admin: gate('admin'), close: async () => undefined },
    });
    expect((await register('echo', agent.card())).status).toBe(201);
  });
  afterAll(async () => {
    await endTaskWorkflows([tenant]);
    await instance?.close();
    for (const a of started) await a.close();
  });

  const headers = { 'x-test-tenant': tenant };
  const register = (name: string, card: unknown, as = tenant) =>
    fetch(`${instance.url}/a2a/agents/${name}`, {
      method: 'PUT',
      headers: { 'x-test-tenant': as, 'content-type': 'application/json' },
      body: JSON.stringify(card),
    });
  const call = async (
    method: string,
    path: string,
    body?: unknown,
    as = tenant,
  ): Promise<{ status: number; body: Record<string, unknown> | null }> => {
    const response = await fetch(`${instance.url}${path}`, {
      method,
      headers: { 'x-test-tenant': as, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) };
  };
  const clientOf = (name: string): Promise<Client> =>
    stockClientOf(`${instance.url}/a2a/agents/${name}/.well-known/agent-card.json`, tenant);
  const send = (text: string, configuration: Record<string, unknown> = {}): SendMessageRequest =>
    SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
      configuration,
    });
  const asTask = (answer: Message | Task): Task => {
    expect('status' in answer).toBe(true);
    return answer as Task;
  };
  const stateOf = async (client: Client, id: string) =>
    (await client.getTask({ tenant: '', id, historyLength: undefined })).status?.state;
  const workflowOf = (id: string) => instance.deps.temporal.client.workflow.getHandle(a2aTaskWorkflowIdOf(id));
  /** An agent's topic (requests or events): another tenant may not subscribe to it, and nobody may publish to it. */
  const expectClosedToOthers = async (topic: string) => {
    expect(
      await call(
        'POST',
        '/subscriptions',
        { protocol: 'STREAM', topic, config: { policy: 'LOAD_BALANCE' } },
        `intruder-${suffix}`,
      ),
    ).toMatchObject({ status: 404, body: { code: 'UNKNOWN_TOPIC' } });
    const published = await fetch(`${instance.url}/events/publish?topic=${encodeURIComponent(topic)}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id: 'x', source: '/x', type: 'x' }),
    });
    expect([published.status, ((await published.json()) as { code: string }).code]).toEqual([404, 'UNKNOWN_TOPIC']);
  };
  /** A STREAM subscription of the tenant to a topic from its start, long-polled: `poll` adds what it gets to `frames`, acknowledged. */
  const collectorOf = async <F>(topic: string) => {
    const subscription = await call('POST', '/subscriptions', {
      protocol: 'STREAM',
      topic,
      config: { policy: 'LOAD_BALANCE', startFrom: 'earliest' },
    });
    expect(subscription.status).toBe(201);
    const id = subscription.body!.id as string;
    const frames: F[] = [];
    const poll = async () => {
      const polled = await call('GET', `/subscriptions/${id}/poll?consumer=c1&window=50&max=50&waitMs=200`);
      for (const d of (polled.body?.deliveries ?? []) as { deliveryId: string; event: F }[]) {
        frames.push(d.event);
        expect(
          (await call('POST', `/subscriptions/${id}/acks`, { deliveryId: d.deliveryId, action: 'ack' })).status,
        ).toBe(200);
      }
    };
    return { frames, poll };
  };

  it("writes the task to the agent's request topic as a frame and runs it as workflow a2a-task/<id>, found by its search attributes", async () => {
    const client = await clientOf('echo');
    const task = asTask(await client.sendMessage(send('echo:visible')));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.artifacts.map((a) => textOf({ parts: a.parts } as Message))).toEqual(['visible']);

    const handle = workflowOf(task.id);
    expect(await handle.result()).toBe('completed');
    // What Temporal did for it: one workflow task, in which the delivery ran as a local activity (its marker) and
    // followed the agent's task to its end itself (the agent answered the send `submitted`); no activity task, no
    // timer (the task's deadline bounds each delivery as its own timeout).
    const events = (await handle.fetchHistory()).events ?? [];
    const count = (has: (e: (typeof events)[number]) => unknown) => events.filter(has).length;
    expect({
      localActivities: count((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity'),
      activities: count((e) => e.activityTaskScheduledEventAttributes),
      timers: count((e) => e.timerStartedEventAttributes),
      workflowTasks: count((e) => e.workflowTaskCompletedEventAttributes),
    }).toEqual({ localActivities: 1, activities: 0, timers: 0, workflowTasks: 1 });
    // Started eagerly: the server answered the start with the first workflow task, for this instance's own worker.
    const health = (await (await fetch(`${instance.url}/health`)).json()) as {
      stats: {
        a2aWorkflowStarts: { total: number; eager: number };
        a2aRequestHandoff: { handed: number; taken: number };
        a2aFirstAttempts: { begun: number; adopted: number };
      };
    };
    expect(health.stats.a2aWorkflowStarts.eager).toBeGreaterThanOrEqual(1);
    // Its delivery took the request from the gateway of its own process, not from Kafka (the record is there too: below).
    expect(health.stats.a2aRequestHandoff).toMatchObject({ handed: 1, taken: 1 });
    // The gateway began the first attempt as the workflow started here, and the workflow's local activity adopted
    // it: the agent was sent the task once.
    expect(health.stats.a2aFirstAttempts).toMatchObject({ begun: 1, adopted: 1 });
    expect(agent.received.filter((text) => text === 'echo:visible')).toHaveLength(1);
    const description = await handle.describe();
    expect(description.type).toBe('a2aTaskWorkflowV2');
    expect(description.taskQueue).toBe('eventmesh-a2a');
    const attribute = (key: (typeof a2aSearchAttributes)[keyof typeof a2aSearchAttributes]) =>
      description.typedSearchAttributes.get(key);
    expect([
      attribute(a2aSearchAttributes.agent),
      attribute(a2aSearchAttributes.tenant),
      attribute(a2aSearchAttributes.state),
    ]).toEqual(['echo', tenant, 'completed']);
    // The history holds ids and states, never the message: its text appears nowhere in it.
    expect(JSON.stringify(await handle.fetchHistory())).not.toContain('visible');
    // Operators find it by agent and state (visibility is eventually consistent).
    const found = await waitFor('the task listed by its search attributes', async () => {
      const ids: string[] = [];
      for await (const run of instance.deps.temporal.client.workflow.list({
        query: `EventMeshAgent = 'echo' AND EventMeshTenant = '${tenant}' AND EventMeshTaskState = 'completed'`,
      }))
        ids.push(run.workflowId);
      return ids.includes(a2aTaskWorkflowIdOf(task.id)) && ids;
    });
    expect(found).toContain(`a2a-task/${task.id}`);

    // The request on the agent's topic: one frame, the task's id, the message with the mesh's ids. The task's row
    // says where (the workflow was started while the record and the row were written: its input names no record).
    const args = (await handle.fetchHistory()).events?.[0]?.workflowExecutionStartedEventAttributes?.input
      ?.payloads?.[0]?.data;
    const input = JSON.parse(Buffer.from(args as Uint8Array).toString('utf8')) as { taskId: string; request?: unknown };
    expect([input.taskId, input.request]).toEqual([task.id, undefined]);
    const row = await instance.deps.db.getRepository(A2ATaskEntity).findOneByOrFail({ id: task.id });
    const position = row.requestRecord!;
    expect(position.topic).toBe(requestTopicOf(tenant, 'echo'));
    const reader = new PartitionReader(instance.deps.kafka);
    await reader.connect();
    try {
      const [fetched] = await reader.fetch([position], { maxWaitMs: 0 });
      const record = fetched.records.find((r) => r.offset === position.offset)!;
      const carried = taskFromFrame(frameFromKafkaRecord(record.headers, record.value));
      expect(carried).toMatchObject({ taskId: task.id, agent: 'echo' });
      expect(textOf(carried.request.message)).toBe('echo:visible');
    } finally {
      await reader.disconnect();
    }
  });

  it('keeps a task for an agent that is down until the agent is back, then completes it once', async () => {
    const port = await freePort();
    const late = new EchoAgent();
    started.push(late);
    late.url = `http://127.0.0.1:${port}/`;
    expect((await register('late', late.card())).status).toBe(201);
    const client = await clientOf('late');
    const task = asTask(await client.sendMessage(send('echo:waited', { returnImmediately: true })));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    // The delivery was tried and refused at least twice (Temporal retries it with backoff): the agent is down.
    await waitFor(
      'the delivery retried',
      async () => ((await workflowOf(task.id).describe()).raw.pendingActivities?.[0]?.attempt ?? 0) >= 2,
    );
    expect(await stateOf(client, task.id)).toBe(TaskState.TASK_STATE_SUBMITTED);
    await late.start(port);
    await waitFor(
      'the task completed after the agent came back',
      async () => (await stateOf(client, task.id)) === TaskState.TASK_STATE_COMPLETED,
      { timeoutMs: 60_000 },
    );
    expect(late.received).toEqual(['echo:waited']);
    expect(await workflowOf(task.id).result()).toBe('completed');
  }, 120_000);

  it('sends the first turn again to an agent that restarted without the task (GetTask: not found); the task completes', async () => {
    const port = await freePort();
    const first = new EchoAgent();
    started.push(first);
    await first.start(port);
    // Its own task timeout, far beyond what the test takes: the task ends by the lost-task rule, never by a timeout
    // that a loaded host's restarts and retries could reach first (the suite's 12 s).
    const card = {
      ...first.card(),
      capabilities: {
        streaming: false,
        pushNotifications: false,
        extensions: [{ uri: TASK_POLICY_EXTENSION, params: { timeoutMs: 300_000 } }],
      },
    };
    expect((await register('forgetful', card)).status).toBe(201);
    const client = await clientOf('forgetful');
    // The mesh recorded the turn as taken by the agent (its task id, at the agent now running): only a task the
    // mesh knows the agent took can be lost by it. An agent killed before the mesh read its answer did not take the
    // turn as far as the mesh knows, and gets it again (at least once), which is not this rule.
    const recordedAt = async (id: string, before: string | null): Promise<string> => {
      let taken: string | null = null;
      await waitFor(
        'the mesh recording the turn taken by the agent',
        async () => {
          const row = await instance.deps.db.getRepository(A2ATaskEntity).findOneByOrFail({ id });
          taken = row.deliveredTurn === 1 && row.agentTaskId !== before ? row.agentTaskId : null;
          return taken !== null;
        },
        { timeoutMs: 60_000 },
      );
      return taken!;
    };
    const key = randomUUID();
    const task = asTask(await client.sendMessage(send(`hold:${key}`, { returnImmediately: true })));
    await waitFor('the agent holding the task', () => first.isHeld(key));
    await recordedAt(task.id, null);
    // The agent dies with the task in its memory; another process of it listens where the card says.
    await first.crash();
    const second = new EchoAgent();
    started.push(second);
    await second.start(port);
    await waitFor('the turn sent again to the restarted agent', () => second.isHeld(key), { timeoutMs: 60_000 });
    second.release(key);
    await waitFor(
      'the task completed',
      async () => (await stateOf(client, task.id)) === TaskState.TASK_STATE_COMPLETED,
      { timeoutMs: 60_000 },
    );
    expect([first.received, second.received]).toEqual([[`hold:${key}`], [`hold:${key}`]]);
    expect(await workflowOf(task.id).result()).toBe('completed');

    // Once only: an agent that loses the task again (here, restarted again) fails it, its turn not sent a third time.
    const again = randomUUID();
    const lost = asTask(await client.sendMessage(send(`hold:${again}`, { returnImmediately: true })));
    let current = second;
    let taken: string | null = null;
    for (let death = 0; death < 2; death++) {
      await waitFor('the agent holding the task', () => current.isHeld(again), { timeoutMs: 60_000 });
      taken = await recordedAt(lost.id, taken);
      await current.crash();
      current = new EchoAgent();
      started.push(current);
      await current.start(port);
    }
    await waitFor('the task failed', async () => (await stateOf(client, lost.id)) === TaskState.TASK_STATE_FAILED, {
      timeoutMs: 60_000,
    });
    expect(
      textOf((await client.getTask({ tenant: '', id: lost.id, historyLength: undefined })).status?.message),
    ).toContain('the agent lost the task');
    expect(current.received).toEqual([]);
  }, 360_000);

  it('fails a task whose agent does not come back within the task timeout', async () => {
    const never = {
      ...agent.card(),
      supportedInterfaces: [
        { url: `http://127.0.0.1:${await freePort()}/`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      ],
    };
    expect((await register('never', never)).status).toBe(201);
    const started = Date.now();
    const task = asTask(await (await clientOf('never')).sendMessage(send('echo:lost')));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(textOf(task.status?.message)).toContain('did not settle within its timeout of 12000 ms');
    expect(Date.now() - started).toBeGreaterThanOrEqual(12000);
  });

  it("applies the agent's own task policy (its card's extension): its timeout, and its retry's last attempt", async () => {
    const down = async () => [
      { url: `http://127.0.0.1:${await freePort()}/`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
    ];
    const withPolicy = async (params: unknown) => ({
      ...agent.card(),
      supportedInterfaces: await down(),
      capabilities: { extensions: [{ uri: TASK_POLICY_EXTENSION, params }] },
    });
    // A malformed policy is refused at registration, naming the field; nothing is stored.
    const bad = await register('policy-bad', await withPolicy({ retry: { maximumAttempts: -1 } }));
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({
      code: 'INVALID_AGENT_CARD',
      field: 'capabilities.extensions.0.params.retry.maximumAttempts',
    });
    expect((await call('GET', '/a2a/agents/policy-bad')).status).toBe(404);

    // Its own timeout (3 s), not the mesh's (12 s).
    expect((await register('policy-short', await withPolicy({ timeoutMs: 3000 }))).status).toBe(201);
    const short = asTask(await (await clientOf('policy-short')).sendMessage(send('echo:short')));
    expect(short.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(textOf(short.status?.message)).toContain('did not settle within its timeout of 3000 ms');

    // Its retry: two attempts, 200 ms apart, then the task fails on the delivery's error, long before its timeout.
    expect(
      (await register('policy-twice', await withPolicy({ retry: { maximumAttempts: 2, initialIntervalMs: 200 } })))
        .status,
    ).toBe(201);
    const twice = asTask(await (await clientOf('policy-twice')).sendMessage(send('echo:twice')));
    expect(twice.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(textOf(twice.status?.message)).toContain('the delivery to the agent failed');
    const history = await workflowOf(twice.id).fetchHistory();
    // Two attempts: the first within the first workflow task (a local activity, its marker), the second a delivery
    // activity with the one attempt the policy has left.
    expect(
      history.events?.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity'),
    ).toHaveLength(1);
    const scheduled = history.events?.filter(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverTask',
    );
    expect(scheduled?.map((e) => e.activityTaskScheduledEventAttributes?.retryPolicy?.maximumAttempts)).toEqual([1]);
    // Between them, the policy's first interval (200 ms), as between two attempts of Temporal's own retry.
    const kinds = (history.events ?? [])
      .map((e) =>
        e.markerRecordedEventAttributes?.markerName === 'core_local_activity'
          ? 'local'
          : e.timerStartedEventAttributes
            ? `timer ${Number(e.timerStartedEventAttributes.startToFireTimeout?.nanos ?? 0) / 1e6 + Number(e.timerStartedEventAttributes.startToFireTimeout?.seconds ?? 0) * 1000}ms`
            : e.activityTaskScheduledEventAttributes
              ? 'activity'
              : undefined,
      )
      .filter(Boolean);
    expect(kinds.slice(0, 3)).toEqual(['local', 'timer 200ms', 'activity']);
    expect(
      history.events?.find((e) => e.activityTaskStartedEventAttributes)?.activityTaskStartedEventAttributes?.attempt,
    ).toBe(1);
  });

  it("continues a task that asked for input (multi-turn): each turn reaches the agent's task once, a new run of its workflow each", async () => {
    const client = await clientOf('echo');
    const asked = asTask(await client.sendMessage(send('ask:which colour?')));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(textOf(asked.status?.message)).toBe('which colour?');
    const turn = (text: string, taskId = asked.id): SendMessageRequest =>
      SendMessageRequest.fromJSON({
        message: { messageId: randomUUID(), taskId, contextId: asked.contextId, role: 'ROLE_USER', parts: [{ text }] },
      });

    // A second question, then the answer: the same task all along, completed with the answer.
    // The second turn streamed: the task as it is (working), then its updates, ending where it asks again.
    const streamed: StreamResponse[] = [];
    for await (const event of client.sendMessageStream(turn('ask:light or dark?'))) streamed.push(event);
    expect(streamed[0].payload?.$case).toBe('task');
    const last = streamed[streamed.length - 1].payload;
    expect(
      last?.$case === 'statusUpdate'
        ? [last.value.taskId, last.value.status?.state, textOf(last.value.status?.message)]
        : last,
    ).toEqual([asked.id, TaskState.TASK_STATE_INPUT_REQUIRED, 'light or dark?']);
    const answered = asTask(await client.sendMessage(turn('dark blue')));
    expect([answered.id, answered.status?.state]).toEqual([asked.id, TaskState.TASK_STATE_COMPLETED]);
    expect(answered.artifacts.map((a) => textOf({ parts: a.parts } as Message))).toContain('answered dark blue');
    // Each turn reached the agent once, as a message of the agent's one task.
    for (const text of ['ask:which colour?', 'ask:light or dark?', 'dark blue'])
      expect(agent.received.filter((r) => r === text)).toHaveLength(1);
    // Three runs of a2a-task/<id>, one per turn, each ended where its turn settled.
    // A send is answered once the turn's outcome is recorded; its run completes right after (visibility lags too).
    const runs = await waitFor('three completed runs', async () => {
      const listed: { status: string; runId: string }[] = [];
      for await (const run of instance.deps.temporal.client.workflow.list({
        query: `WorkflowId = '${a2aTaskWorkflowIdOf(asked.id)}'`,
      }))
        listed.push({ status: run.status.name, runId: run.runId });
      return listed.length === 3 && listed.every((r) => r.status === 'COMPLETED') && listed;
    });
    expect(runs.map((r) => r.status)).toEqual(['COMPLETED', 'COMPLETED', 'COMPLETED']);
    expect(await workflowOf(asked.id).result()).toBe('completed');

    // A terminal task takes no more messages (-32004), nor does another agent's or an unknown one (-32001).
    await expect(client.sendMessage(turn('more'))).rejects.toThrow(/completed/);
    const rpc = (body: unknown) =>
      fetch(`${instance.url}/a2a/agents/echo/rpc`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'a2a-version': '1.0' },
        body: JSON.stringify(body),
      }).then((r) => r.json() as Promise<{ error?: { code: number } }>);
    const message = (taskId: string) => ({
      jsonrpc: '2.0',
      id: 1,
      method: 'SendMessage',
      params: { message: { messageId: randomUUID(), taskId, role: 'ROLE_USER', parts: [{ text: 'x' }] } },
    });
    expect((await rpc(message(asked.id))).error?.code).toBe(-32004);
    expect((await rpc(message(randomUUID()))).error?.code).toBe(-32001);
    // A working task takes none either.
    const parked = asTask(await client.sendMessage(send('park', { returnImmediately: true })));
    await waitFor(
      'the parked task working',
      async () => (await stateOf(client, parked.id)) === TaskState.TASK_STATE_WORKING,
    );
    expect((await rpc(message(parked.id))).error?.code).toBe(-32004);
    await client.cancelTask({ tenant: '', id: parked.id, metadata: undefined });
  });

  it('a cancel through the stock client reaches the running task at the agent, through the workflow', async () => {
    const client = await clientOf('echo');
    const key = randomUUID();
    const task = asTask(await client.sendMessage(send(`hold:${key}`, { returnImmediately: true })));
    await waitFor('the agent working on the task', () => agent.isHeld(key));
    await waitFor(
      'the task recorded working',
      async () => (await stateOf(client, task.id)) === TaskState.TASK_STATE_WORKING,
    );
    const row = await instance.deps.db.getRepository(A2ATaskEntity).findOneByOrFail({ id: task.id });
    const canceled = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect(agent.canceled.has(row.agentTaskId!)).toBe(true);
    expect(await workflowOf(task.id).result()).toBe('canceled');
    agent.release(key);
  });

  describe('mesh-subscriber agents', () => {
    const subscriberCard = () => ({ ...agent.card(), name: 'worker', supportedInterfaces: [] });

    it("two replicas share 20 tasks through the agent's subscription (LOAD_BALANCE), each done once, answered by updates", async () => {
      expect((await register('worker?style=subscriber', subscriberCard())).status).toBe(201);
      const topic = requestTopicOf(tenant, 'worker');
      await expectClosedToOthers(topic);
      const subscription = await call('POST', '/subscriptions', {
        protocol: 'STREAM',
        topic,
        config: { policy: 'LOAD_BALANCE', startFrom: 'earliest' },
      });
      expect(subscription.status).toBe(201);
      const id = subscription.body!.id as string;

      const done: Record<string, string[]> = { r1: [], r2: [] };
      let stopped = false;
      const replica = async (name: string) => {
        while (!stopped) {
          await call('POST', '/a2a/agents/worker/heartbeat');
          const polled = await call('GET', `/subscriptions/${id}/poll?consumer=${name}&window=1&max=1&waitMs=300`);
          for (const d of (polled.body?.deliveries ?? []) as {
            deliveryId: string;
            event: { a2ataskid: string; data: { message: { parts: { text: string }[] } } };
          }[]) {
            const text = d.event.data.message.parts[0].text;
            const answer = await call('POST', `/a2a/agents/worker/tasks/${d.event.a2ataskid}/updates`, {
              state: 'TASK_STATE_COMPLETED',
              message: { messageId: randomUUID(), role: 'ROLE_AGENT', parts: [{ text: `done by ${name}` }] },
              artifacts: [{ artifactId: randomUUID(), name: 'result', parts: [{ text: `${name}:${text}` }] }],
            });
            expect(answer).toMatchObject({ status: 200, body: { state: 'completed' } });
            done[name].push(d.event.a2ataskid);
            expect(
              (await call('POST', `/subscriptions/${id}/acks`, { deliveryId: d.deliveryId, action: 'ack' })).status,
            ).toBe(200);
          }
        }
      };
      const replicas = [replica('r1'), replica('r2')];
      try {
        const client = await clientOf('worker');
        const sent = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            client.sendMessage(send(`job ${i}`, { returnImmediately: true })).then((a) => asTask(a).id),
          ),
        );
        await waitFor('the 20 tasks completed', async () =>
          (await Promise.all(sent.map((t) => stateOf(client, t)))).every((s) => s === TaskState.TASK_STATE_COMPLETED),
        );
        stopped = true;
        await Promise.all(replicas);
        expect([...done.r1, ...done.r2].sort()).toEqual([...sent].sort());
        expect([done.r1.length, done.r2.length].every((n) => n > 0)).toBe(true);
        const one = await client.getTask({ tenant: '', id: sent[0], historyLength: undefined });
        expect(one.artifacts.map((a) => textOf({ parts: a.parts } as Message))).toEqual([
          expect.stringMatching(/^r[12]:job 0$/),
        ]);
        expect(await Promise.all(sent.map((t) => workflowOf(t).result()))).toEqual(sent.map(() => 'completed'));
        // A task that ended takes no more updates.
        expect(await call('POST', `/a2a/agents/worker/tasks/${sent[0]}/updates`, { state: 'working' })).toMatchObject({
          status: 409,
          body: { code: 'ILLEGAL_TRANSITION' },
        });
        expect(await call('POST', `/a2a/agents/worker/tasks/${sent[0]}/updates`, { state: 'bogus' })).toMatchObject({
          status: 400,
          body: { code: 'INVALID_REQUEST', field: 'state' },
        });
        expect(
          await call('POST', `/a2a/agents/worker/tasks/${randomUUID()}/updates`, { state: 'working' }),
        ).toMatchObject({ status: 404, body: { code: 'TASK_NOT_FOUND' } });
      } finally {
        stopped = true;
        await Promise.allSettled(replicas);
      }
    });

    /**
     * One agent per way of receiving its tasks other than long-poll (above): a WebSocket replica (acks on its socket),
     * an SSE replica (acks by POST), and a webhook (the mesh pushes each task; the sink answers 200 after its update).
     * Each completes its tasks with updates; each task a blocking send, answered completed by the agent's replica.
     */
    it('agents receiving their tasks over WebSocket, SSE and a webhook complete blocking sends, each task once', async () => {
      type Frame = { a2ataskid: string; data: { message: { parts: { text: string }[] } } };
      const done: Record<string, string[]> = { ws: [], sse: [], hook: [] };
      /** What went wrong in a replica's callbacks (asserted at the end: they run outside the test's own awaits). */
      const failures: string[] = [];
      const complete = async (name: string, frame: Frame) => {
        done[name].push(frame.a2ataskid);
        const answer = await call('POST', `/a2a/agents/${name}/tasks/${frame.a2ataskid}/updates`, {
          state: 'TASK_STATE_COMPLETED',
          artifacts: [
            {
              artifactId: randomUUID(),
              name: 'result',
              parts: [{ text: `${name}:${frame.data.message.parts[0].text}` }],
            },
          ],
        });
        if (answer.status !== 200 || answer.body?.state !== 'completed')
          failures.push(`${name}: the update answered ${answer.status} ${JSON.stringify(answer.body)}`);
      };
      const recorded = (what: string) => (e: unknown) => void failures.push(`${what}: ${(e as Error).message}`);
      const subscribe = async (name: string, body: Record<string, unknown>): Promise<string> => {
        expect((await register(`${name}?style=subscriber`, { ...subscriberCard(), name })).status).toBe(201);
        const created = await call('POST', '/subscriptions', { topic: requestTopicOf(tenant, name), ...body });
        expect(created.status).toBe(201);
        return created.body!.id as string;
      };
      const wsId = await subscribe('ws', {
        protocol: 'STREAM',
        config: { policy: 'LOAD_BALANCE', startFrom: 'earliest' },
      });
      const sseId = await subscribe('sse', {
        protocol: 'STREAM',
        config: { policy: 'LOAD_BALANCE', startFrom: 'earliest' },
      });
      const receiver = new WebhookReceiver();
      const stop = new AbortController();
      let socket: WebSocket | undefined;
      let sse: Promise<void> | undefined;
      const heartbeats = setInterval(
        () =>
          void Promise.all(['ws', 'sse', 'hook'].map((name) => call('POST', `/a2a/agents/${name}/heartbeat`))).catch(
            recorded('heartbeat'),
          ),
        500,
      );
      try {
        await receiver.start();
        receiver.gate = (request) =>
          complete('hook', {
            a2ataskid: String(request.headers['ce-a2ataskid']),
            data: JSON.parse(request.body.toString()) as Frame['data'],
          }).catch(recorded('webhook'));
        await subscribe('hook', { sink: receiver.url, config: { startFrom: 'earliest' } });

        const ws = new WebSocket(`${instance.url!.replace('http', 'ws')}/subscriptions/${wsId}/ws?window=1`, {
          headers,
        });
        socket = ws;
        ws.on('message', (m) => {
          const message = JSON.parse(String(m)) as { type: string; deliveryId: string; event: Frame };
          if (message.type !== 'event') return;
          void complete('ws', message.event)
            .then(() => ws.send(JSON.stringify({ type: 'ack', deliveryId: message.deliveryId })))
            .catch(recorded('websocket'));
        });
        sse = (async () => {
          const response = await fetch(`${instance.url}/subscriptions/${sseId}/events?window=1`, {
            headers,
            signal: stop.signal,
          });
          if (response.status !== 200) throw new Error(`the SSE stream answered ${response.status}`);
          let text = '';
          for await (const chunk of response.body!) {
            text += Buffer.from(chunk as Uint8Array).toString();
            let end: number;
            while ((end = text.indexOf('\n\n')) >= 0) {
              const message = text.slice(0, end);
              text = text.slice(end + 2);
              const data = /^data: (.*)$/m.exec(message);
              if (!/^event: cloudevent$/m.test(message) || !data) continue;
              const delivery = JSON.parse(data[1]) as { deliveryId: string; event: Frame };
              await complete('sse', delivery.event);
              const acked = await call('POST', `/subscriptions/${sseId}/acks`, {
                deliveryId: delivery.deliveryId,
                action: 'ack',
              });
              if (acked.status !== 200) failures.push(`sse: the ack answered ${acked.status}`);
            }
          }
        })().catch((e: unknown) => {
          if (!stop.signal.aborted) recorded('sse')(e);
        });
        await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
        for (const name of ['ws', 'sse', 'hook']) {
          const client = await clientOf(name);
          const tasks = await Promise.all(
            [1, 2, 3].map(async (i) => asTask(await client.sendMessage(send(`job ${i}`)))),
          );
          expect(failures).toEqual([]);
          expect(tasks.map((t) => t.status?.state)).toEqual(tasks.map(() => TaskState.TASK_STATE_COMPLETED));
          expect(tasks.map((t) => t.artifacts.map((a) => textOf({ parts: a.parts } as Message)))).toEqual(
            tasks.map(() => [expect.stringMatching(new RegExp(`^${name}:job [123]$`))]),
          );
          expect([...done[name]].sort()).toEqual(tasks.map((t) => t.id).sort());
        }
        expect(failures).toEqual([]);
      } finally {
        clearInterval(heartbeats);
        stop.abort();
        socket?.terminate();
        await sse;
        await receiver.stop();
      }
    });

    it("a task canceled by its client, and one failed at its deadline, reach the agent's replicas as cancel frames after their requests", async () => {
      const card = {
        ...subscriberCard(),
        name: 'stopper',
        capabilities: {
          ...(agent.card().capabilities as object),
          extensions: [{ uri: TASK_POLICY_EXTENSION, params: { timeoutMs: 2000 } }],
        },
      };
      expect((await register('stopper?style=subscriber', card)).status).toBe(201);
      const { frames, poll } = await collectorOf<{
        id: string;
        type: string;
        a2ataskid: string;
        a2areason?: string;
        data: unknown;
      }>(requestTopicOf(tenant, 'stopper'));
      const framesOf = (taskId: string) =>
        frames.filter((f) => f.a2ataskid === taskId).map((f) => [f.id, f.type, f.a2areason, f.data]);

      const client = await clientOf('stopper');
      const canceled = asTask(await client.sendMessage(send('a long job', { returnImmediately: true })));
      await waitFor('the request at the agent', async () => (await poll(), framesOf(canceled.id).length === 1));
      expect(
        (await call('POST', `/a2a/agents/stopper/tasks/${canceled.id}/updates`, { state: 'working' })).status,
      ).toBe(200);
      expect((await client.cancelTask({ tenant: '', id: canceled.id, metadata: undefined })).status?.state).toBe(
        TaskState.TASK_STATE_CANCELED,
      );
      await waitFor('the cancel at the agent', async () => (await poll(), framesOf(canceled.id).length === 2));
      expect(framesOf(canceled.id)).toEqual([
        [
          canceled.id,
          'a2a.task.send',
          undefined,
          expect.objectContaining({ message: expect.objectContaining({ taskId: canceled.id }) }),
        ],
        [`${canceled.id}.cancel`, 'a2a.task.cancel', 'canceled', { id: canceled.id }],
      ]);
      expect(
        await call('POST', `/a2a/agents/stopper/tasks/${canceled.id}/updates`, { state: 'completed' }),
      ).toMatchObject({ status: 409, body: { code: 'ILLEGAL_TRANSITION' } });

      // Nobody answers this one: its workflow fails it at its deadline (2 s), and the agent is told.
      const abandoned = asTask(await client.sendMessage(send('a job nobody finishes', { returnImmediately: true })));
      await waitFor(
        'the task failed and the agent told',
        async () => (await poll(), framesOf(abandoned.id).length === 2),
        { timeoutMs: 60_000 },
      );
      expect(framesOf(abandoned.id).map((f) => f.slice(0, 3))).toEqual([
        [abandoned.id, 'a2a.task.send', undefined],
        [`${abandoned.id}.cancel`, 'a2a.task.cancel', 'failed'],
      ]);
      // The notice is written before the task fails (so that a crash between them tries again): the failure follows.
      // (Read from Postgres: the agent's card may have expired meanwhile, its heartbeat TTL being 3 s here.)
      await waitFor(
        'the abandoned task failed',
        async () =>
          (await instance.deps.db.getRepository(A2ATaskEntity).findOneByOrFail({ id: abandoned.id })).state ===
          'failed',
      );
      // Nobody observes this agent: its tasks' events are marked published by a worker's sweep, never written.
      await waitFor('the sweep to mark the unobserved events', async () => {
        const rows = await instance.deps.db
          .getRepository(A2ATaskEntity)
          .findBy({ id: In([canceled.id, abandoned.id]) });
        return rows.length === 2 && rows.every((r) => r.publishedSeq === r.eventSeq);
      });
      expect(await topicEndOffset(instance.deps.kafka, eventsTopicOf(tenant, 'stopper'))).toBe(0);
    }, 180_000);

    it("a subscriber's card expires without a heartbeat, and is back with one", async () => {
      expect((await register('sleepy?style=subscriber', { ...subscriberCard(), name: 'sleepy' })).status).toBe(201);
      expect((await call('GET', '/a2a/agents/sleepy/.well-known/agent-card.json')).status).toBe(200);
      // The TTL is the promise: liveness is judged at each read (last heartbeat + 3 s), so 10 s leaves 7 s for slow requests on a loaded host.
      await waitFor(
        'the card expired',
        async () => (await call('GET', '/a2a/agents/sleepy/.well-known/agent-card.json')).status === 404,
        { timeoutMs: 10_000 },
      );
      expect(((await call('GET', '/a2a/agents')).body!.agents as { name: string }[]).map((a) => a.name)).not.toContain(
        'sleepy',
      );
      expect((await call('POST', '/a2a/agents/sleepy/heartbeat')).status).toBe(204);
      expect((await call('GET', '/a2a/agents/sleepy/.well-known/agent-card.json')).status).toBe(200);
      expect((await call('POST', '/a2a/agents/echo/heartbeat')).status).toBe(404);
      expect(await call('PUT', '/a2a/agents/x?style=pull', subscriberCard())).toMatchObject({
        status: 400,
        body: { code: 'INVALID_REQUEST', field: 'style' },
      });
    });

    it('refuses the heartbeat of a replaced registration (409 STALE_REGISTRATION) and writes nothing; the current one is recorded', async () => {
      const first = await call('PUT', '/a2a/agents/fenced?style=subscriber', { ...subscriberCard(), name: 'fenced' });
      expect(first).toMatchObject({ status: 201, body: { registration: 1, style: 'subscriber' } });
      const second = await call('PUT', '/a2a/agents/fenced?style=subscriber', { ...subscriberCard(), name: 'fenced' });
      expect(second).toMatchObject({ status: 200, body: { registration: 2 } });
      const beatAt = async () =>
        (await instance.deps.db.getRepository(A2AAgentEntity).findOneByOrFail({ tenant, name: 'fenced' })).heartbeatAt;
      const before = await beatAt();
      // A replica of the first registration, still beating after the agent was registered again.
      expect(await call('POST', '/a2a/agents/fenced/heartbeat', { registration: 1 })).toMatchObject({
        status: 409,
        body: { code: 'STALE_REGISTRATION' },
      });
      expect(await beatAt()).toEqual(before);
      expect(await call('POST', '/a2a/agents/fenced/heartbeat', { registration: 3 })).toMatchObject({
        status: 409,
        body: { code: 'STALE_REGISTRATION' },
      });
      expect((await call('POST', '/a2a/agents/fenced/heartbeat', { registration: 2 })).status).toBe(204);
      expect((await beatAt())!.getTime()).toBeGreaterThan(before!.getTime());
      expect((await call('POST', '/a2a/agents/fenced/heartbeat')).status).toBe(204);
      expect(await call('POST', '/a2a/agents/fenced/heartbeat', { registration: 0 })).toMatchObject({
        status: 400,
        body: { code: 'INVALID_REQUEST', field: 'registration' },
      });
      expect(await call('POST', '/a2a/agents/nobody/heartbeat', { registration: 1 })).toMatchObject({ status: 404 });
    });
  });

  it("observers subscribe to an agent's events topic: every event of each task's log, in seq order, as A2A JSON; the sweep republishes what was left unpublished", async () => {
    const topic = eventsTopicOf(tenant, 'echo');
    await expectClosedToOthers(topic);
    // From the topic's start: the agent's earlier tasks' events come too (each frame names its task).
    const { frames, poll } = await collectorOf<{
      id: string;
      type: string;
      a2ataskid: string;
      a2aseq: string;
      a2astate?: string;
      data: Record<string, unknown>;
    }>(topic);
    const client = await clientOf('echo');
    const task = asTask(await client.sendMessage(send('echo:observed')));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const log: { seq: number; kind: string; payload: Record<string, unknown> }[] = await instance.deps.db.query(
      'SELECT seq, kind, payload FROM a2a_task_events WHERE task_id = $1 ORDER BY seq',
      [task.id],
    );
    const ofTask = () => frames.filter((f) => f.a2ataskid === task.id);
    // At once once the publisher knows the topic is observed (it asks every 2 s); by the sweep (5 s) otherwise.
    await waitFor(
      'every event of the task at the observer',
      async () => (await poll(), ofTask().length >= log.length),
      { timeoutMs: 60_000 },
    );
    const kinds: Record<string, string> = {
      task: 'a2a.task.snapshot',
      'status-update': 'a2a.task.status',
      'artifact-update': 'a2a.task.artifact',
    };
    expect(ofTask().map((f) => [f.id, f.type, f.a2aseq, f.data])).toEqual(
      log.map((e) => [`${task.id}.${e.seq}`, kinds[e.kind], String(e.seq), e.payload]),
    );
    expect(ofTask()[0].a2astate).toBe('TASK_STATE_SUBMITTED');
    expect(ofTask()[ofTask().length - 1]).toMatchObject({ type: 'a2a.task.status', a2astate: 'TASK_STATE_COMPLETED' });
    expect(log.map((e) => e.kind)).toContain('artifact-update');

    // A crash between a change's commit and its publication (the task's events marked unpublished, its last change
    // 10 s ago): a worker's sweep (every 5 s) writes them again. The observer sees each again, same ids.
    await instance.deps.db.query(
      `UPDATE a2a_tasks SET published_seq = 0, updated_at = now() - interval '10 seconds' WHERE id = $1`,
      [task.id],
    );
    await waitFor(
      'the sweep to publish the events again',
      async () => (await poll(), ofTask().length >= 2 * log.length),
      { timeoutMs: 60_000 },
    );
    expect(
      ofTask()
        .slice(log.length)
        .map((f) => f.id),
    ).toEqual(log.map((e) => `${task.id}.${e.seq}`));
    // Marked published once Kafka took them, a moment after the observer may have read them.
    const publishedSeq = async () =>
      (
        (await instance.deps.db.query('SELECT published_seq FROM a2a_tasks WHERE id = $1', [task.id])) as {
          published_seq: number;
        }[]
      )[0].published_seq;
    await waitFor('the events marked published again', async () => (await publishedSeq()) === log.length, {
      timeoutMs: 60_000,
    });
  }, 240_000);

  it('a task outlives the worker that was delivering it: another instance follows it to completion, sending nothing twice', async () => {
    // The last case: only worker instances of this case deliver from here on (the first instance keeps its gateway).
    await instance.worker!.stop();
    const workerOnly = (name: string) =>
      startInstance(testConfig({ ...env, EVENTMESH_INSTANCE_ID: `${name}-${suffix}` }), { roles: ['worker'] });
    const first = await workerOnly('a2a-d-w1');
    let second: RunningInstance | undefined;
    try {
      const client = await clientOf('echo');
      const key = randomUUID();
      const task = asTask(await client.sendMessage(send(`hold:${key}`, { returnImmediately: true })));
      await waitFor('the agent working on the task', () => agent.isHeld(key));
      await waitFor(
        'the task recorded working',
        async () => (await stateOf(client, task.id)) === TaskState.TASK_STATE_WORKING,
      );
      // The first attempt (local, within the workflow task) follows the task for a moment, then a delivery activity.
      const following = await waitFor(
        'a delivery activity following the task',
        async () => (await workflowOf(task.id).describe()).raw.pendingActivities?.[0],
      );
      expect(following.lastWorkerIdentity).toContain(`a2a-d-w1-${suffix}@`);
      await first.close();
      second = await workerOnly('a2a-d-w2');
      agent.release(key);
      await waitFor(
        'the task completed by the other instance',
        async () => (await stateOf(client, task.id)) === TaskState.TASK_STATE_COMPLETED,
        { timeoutMs: 60_000 },
      );
      expect(await workflowOf(task.id).result()).toBe('completed');
      expect(agent.received.filter((t) => t === `hold:${key}`)).toHaveLength(1);
    } finally {
      await first.close().catch(() => undefined);
      await second?.close();
      const { client, close } = await temporalClient();
      await terminateWorkflows(client, [`dispatch/a2a-d-w1-${suffix}`, `dispatch/a2a-d-w2-${suffix}`]);
      await close();
    }
  }, 180_000);
});
