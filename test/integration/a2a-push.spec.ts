import { randomBytes, randomUUID } from 'node:crypto';
import { SendMessageRequest, Task, TaskPushNotificationConfig, TaskState } from '@a2a-js/sdk';
import { Client } from '@a2a-js/sdk/client';
import { RequestMalformedError, TaskNotCancelableError, TaskNotFoundError } from '@a2a-js/sdk/errors';
import { ServerCallContext } from '@a2a-js/sdk/server';
import { Webhook } from 'standardwebhooks';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { A2ATaskStore, PushConfigMethods, PushConfigStore, TaskWorkflows } from '@libs/a2a';
import { SecretBox, sealStoredSecrets, SinkGuard } from '@libs/security';
import { a2aSearchAttributes, a2aTaskWorkflowIdOf, pushConfiguredSignal } from '../../workflows';
import { endTaskWorkflows } from '../support/a2a-tasks';
import { EchoAgent } from '../support/a2a-echo-agent';
import { testConfig, uniqueTopic } from '../support/env';
import { DLQ_RETENTION_SCHEDULE_ID } from '@libs/temporal';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { ReceivedRequest, WebhookReceiver } from '../support/webhook-receiver';
import { callAs, headerTenantGate, stockClientOf, tenantFetch } from '../support/header-tenant-gate';

/** What a push carried: the task (v1.0 `StreamResponse.task`, or the v0.3 `Task`), its version (from `webhook-id`). */
interface Push {
  request: ReceivedRequest;
  state: string;
  version: number;
  body: Record<string, unknown>;
}

/**
 * A2A push notifications on a real instance (gateway and worker) with Postgres, Kafka and Temporal, driven by the
 * SDK's stock client; the client's webhook is a loopback receiver (test/support/webhook-receiver.ts). The echo
 * agent's `hold:<key>` task reports `working` and completes (with an artifact) only when the test releases it, so
 * each update is recorded, and pushed, on its own. Webhook retries are fast here (100 ms doubling to 400 ms).
 */
describe('A2A push notifications (real servers, stock @a2a-js/sdk client)', () => {
  const suffix = randomUUID().slice(0, 8);
  const [tenantA, tenantB] = [`push-a-${suffix}`, `push-b-${suffix}`];
  const signingSecret = `whsec_${randomBytes(32).toString('base64')}`;
  const env = {
    EVENTMESH_KAFKA_TOPICS: uniqueTopic('a2a-push'),
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
    EVENTMESH_AGENTS_CALL_TIMEOUT_MS: '5000',
    EVENTMESH_AGENTS_SEND_WAIT_MS: '1500',
    EVENTMESH_AGENTS_PUSH_SIGNING_SECRET: signingSecret,
    EVENTMESH_DELIVERY_RETRY_INITIAL_MS: '100',
    EVENTMESH_DELIVERY_RETRY_MAX_MS: '400',
    EVENTMESH_DELIVERY_MAX_ATTEMPTS: '5',
  };
  const config = testConfig({ ...env, EVENTMESH_INSTANCE_ID: `a2a-push-${suffix}` });
  const gateOf = (name: string) => headerTenantGate(name);
  const gates = { ingress: gateOf('ingress'), admin: gateOf('admin'), close: async () => undefined };
  const agent = new EchoAgent();
  /** A URL agent whose card says it streams (the mesh follows its tasks on its streams); one case uses it. */
  const streamer = new EchoAgent({ streaming: true });
  const receiver = new WebhookReceiver();
  let instance: RunningInstance;

  beforeAll(async () => {
    await agent.start();
    await streamer.start();
    await receiver.start();
    instance = await startInstance(config, { roles: ['gateway', 'worker'], gates });
    for (const tenant of [tenantA, tenantB]) {
      const response = await fetch(`${instance.url}/a2a/agents/echo`, {
        method: 'PUT',
        headers: { 'x-test-tenant': tenant, 'content-type': 'application/json' },
        body: JSON.stringify(agent.card()),
      });
      expect(response.status).toBe(201);
    }
    const response = await fetch(`${instance.url}/a2a/agents/streamer`, {
      method: 'PUT',
      headers: { 'x-test-tenant': tenantA, 'content-type': 'application/json' },
      body: JSON.stringify({ ...streamer.card(), name: 'streamer' }),
    });
    expect(response.status).toBe(201);
  });
  afterAll(async () => {
    await endTaskWorkflows([tenantA, tenantB]);
    await instance?.close();
    await agent.close();
    await streamer.close();
    await receiver.stop();
  });
  beforeEach(() => {
    receiver.status = () => 200;
    receiver.gate = undefined;
  });

  const fetchAs = tenantFetch;
  const cardUrl = () => `${instance.url}/a2a/agents/echo/.well-known/agent-card.json`;
  const clientOf = (tenant: string): Promise<Client> => stockClientOf(cardUrl(), tenant);
  const restClientOf = (tenant: string): Promise<Client> => stockClientOf(cardUrl(), tenant, 'rest');
  const rpc = async (tenant: string, method: string, params: unknown, version?: string) => {
    const response = await fetchAs(tenant)(`${instance.url}/a2a/agents/echo/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(version ? { 'a2a-version': version } : {}) },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return (await response.json()) as { result?: Record<string, unknown>; error?: { code: number; message: string } };
  };
  const send = (text: string, push?: Partial<TaskPushNotificationConfig>): SendMessageRequest =>
    SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
      configuration: { returnImmediately: true, ...(push ? { taskPushNotificationConfig: push } : {}) },
    });
  const started = async (client: Client, text: string, push?: Partial<TaskPushNotificationConfig>): Promise<Task> => {
    const answer = await client.sendMessage(send(text, push));
    expect('status' in answer).toBe(true);
    return answer as Task;
  };
  /** The pushes of a task the receiver got (every attempt), in the order they arrived. */
  const pushesOf = (taskId: string): Push[] =>
    receiver.requests
      .filter((r) => String(r.headers['webhook-id'] ?? '').startsWith(`${taskId}:`))
      .map((request) => {
        const body = JSON.parse(request.body.toString('utf8')) as Record<string, unknown>;
        const task = (body.task ?? body) as { status: { state: string } };
        return {
          request,
          body,
          state: task.status.state,
          version: Number(String(request.headers['webhook-id']).split(':').pop()),
        };
      });
  const settled = (taskId: string, state: string) =>
    waitFor(
      `a push of ${taskId} in ${state}`,
      () => pushesOf(taskId).some((p) => p.state === state) && pushesOf(taskId),
    );
  /** Releases a `hold:` task once the agent holds it. */
  const release = async (key: string) => {
    await waitFor(`the agent holding ${key}`, () => agent.isHeld(key));
    agent.release(key);
  };

  it('pushes each update of a task sent with a config, in order, with the token and a valid signature (v1.0)', async () => {
    const client = await clientOf(tenantA);
    const key = randomUUID();
    const token = `tok-${randomUUID()}`;
    const task = await started(client, `hold:${key}`, { url: receiver.url!, token });
    await waitFor('the working update pushed', () => pushesOf(task.id).some((p) => p.state === 'TASK_STATE_WORKING'));
    await release(key);
    const pushes = await settled(task.id, 'TASK_STATE_COMPLETED');

    // Each change once, in order: versions strictly increasing, working before the completion, which is the last.
    const versions = pushes.map((p) => p.version);
    expect(versions).toEqual([...new Set(versions)].sort((a, b) => a - b));
    expect(pushes.map((p) => p.state).filter((s) => s !== 'TASK_STATE_SUBMITTED')).toEqual([
      'TASK_STATE_WORKING',
      'TASK_STATE_COMPLETED',
    ]);
    const last = pushes[pushes.length - 1];
    expect(last.body).toMatchObject({
      task: {
        id: task.id,
        status: { state: 'TASK_STATE_COMPLETED' },
        artifacts: [{ name: 'echo', parts: [{ text: `hold:${key}` }] }],
      },
    });
    for (const { request } of pushes) {
      expect(request.headers['x-a2a-notification-token']).toBe(token);
      expect(request.headers['content-type']).toBe('application/a2a+json');
      expect(() =>
        new Webhook(signingSecret).verify(request.body, request.headers as Record<string, string>),
      ).not.toThrow();
      expect(() =>
        new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(
          request.body,
          request.headers as Record<string, string>,
        ),
      ).toThrow();
    }
  });

  it('pushes to a config set on a running task with the stock client, with its authentication', async () => {
    const client = await clientOf(tenantA);
    const key = randomUUID();
    const task = await started(client, `hold:${key}`);
    await waitFor(
      'the task working at the mesh',
      async () =>
        agent.isHeld(key) &&
        (await client.getTask({ tenant: '', id: task.id, historyLength: 0 })).status?.state ===
          TaskState.TASK_STATE_WORKING,
    );
    const set = await client.createTaskPushNotificationConfig({
      tenant: '',
      id: 'hook-1',
      taskId: task.id,
      url: receiver.url!,
      token: '',
      authentication: { scheme: 'Bearer', credentials: 'sekrit' },
    });
    expect(set).toMatchObject({
      id: 'hook-1',
      taskId: task.id,
      url: receiver.url,
      authentication: { scheme: 'Bearer', credentials: 'sekrit' },
    });
    agent.release(key);
    const pushes = await settled(task.id, 'TASK_STATE_COMPLETED');
    // Set once the task was working: the changes after it only.
    expect(pushes.map((p) => p.state)).toEqual(['TASK_STATE_COMPLETED']);
    expect(pushes[0].request.headers.authorization).toBe('Bearer sekrit');
    expect(pushes[0].request.headers['x-a2a-notification-token']).toBeUndefined();
    // At rest the credentials are sealed (the box of the instance's secrets): the row holds no 'sekrit'.
    const [row] = await instance.deps.db.query(
      'SELECT token, authentication FROM a2a_push_configs WHERE task_id = $1',
      [task.id],
    );
    expect(SecretBox.isSealed(row.authentication.credentials)).toBe(true);
    expect(JSON.stringify(row)).not.toContain('sekrit');
  });

  it("an agent that streams, with a push config, is listened to without a break: every status in the task's log, pushes while it runs", async () => {
    const client = await stockClientOf(`${instance.url}/a2a/agents/streamer/.well-known/agent-card.json`, tenantA);
    const key = randomUUID();
    // `steps:`: step 1 and step 2 at once, the artifact in two chunks, then (once released) step 3 and the completion.
    const task = await started(client, `steps:${key}`, { url: receiver.url!, token: 'tok-steps' });
    // Pushed while the delivery follows the agent (the task working, its artifact whole), before the agent goes on.
    const working = await waitFor('a push of the working task with its artifact', () =>
      pushesOf(task.id).find(
        (p) => p.state === 'TASK_STATE_WORKING' && JSON.stringify(p.body).includes('"text":"two"'),
      ),
    );
    expect(streamer.isHeld(key)).toBe(true);
    expect(working.request.headers['x-a2a-notification-token']).toBe('tok-steps');
    expect(streamer.release(key)).toBe(true);
    const pushes = await settled(task.id, 'TASK_STATE_COMPLETED');
    expect(pushes[pushes.length - 1].body).toMatchObject({
      task: { status: { state: 'TASK_STATE_COMPLETED', message: { parts: [{ text: 'done' }] } } },
    });
    // Every status the agent reported is in the task's log, in order (step 1 and step 2 came within a microsecond).
    const log = (await instance.deps.db.query(
      "SELECT payload FROM a2a_task_events WHERE task_id = $1 AND kind = 'status-update' ORDER BY seq",
      [task.id],
    )) as { payload: { status: { message?: { parts?: { text?: string }[] } } } }[];
    const statuses = log
      .map((e) => (e.payload.status.message?.parts ?? []).map((p) => p.text).join(''))
      .filter(Boolean);
    expect(statuses).toEqual(['step 1', 'step 2', 'step 3', 'done']);
    // One stream for the whole task: the first attempt's, left open for the delivery after it on the same worker,
    // which read on and told the workflow of each change by signal instead of answering it: one delivery activity.
    expect(streamer.methods).toEqual(['SendStreamingMessage']);
    const health = (await (await fetch(`${instance.url}/health`)).json()) as {
      stats: { a2aParkedStreams: { parked: number; taken: number; held: number } };
    };
    expect(health.stats.a2aParkedStreams.taken).toBeGreaterThanOrEqual(1);
    const workflows = await temporalClient();
    try {
      const history = await workflows.client.workflow.getHandle(a2aTaskWorkflowIdOf(task.id)).fetchHistory();
      const scheduled = history.events?.filter(
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverTask',
      );
      expect(scheduled).toHaveLength(1);
      expect(
        history.events?.filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'changed').length,
      ).toBeGreaterThanOrEqual(1);
    } finally {
      await workflows.close();
    }
  });

  it('pushes the cancel of a task that waits for input (its workflow ended): a run of its own cancels it and pushes', async () => {
    const client = await clientOf(tenantA);
    const task = await started(client, 'ask:which one?', { url: receiver.url!, token: 'tok-ask' });
    await settled(task.id, 'TASK_STATE_INPUT_REQUIRED');
    const workflows = await temporalClient();
    try {
      const first = workflows.client.workflow.getHandle(a2aTaskWorkflowIdOf(task.id));
      await waitFor("the task's workflow to end", async () => (await first.describe()).status.name === 'COMPLETED');
      const canceled = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
      expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      const pushes = await settled(task.id, 'TASK_STATE_CANCELED');
      expect(pushes.map((p) => p.state).slice(-2)).toEqual(['TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_CANCELED']);
      expect(pushes[pushes.length - 1].request.headers['x-a2a-notification-token']).toBe('tok-ask');
      // The cancel ran as a run of the task's workflow, of its own type, listed with the task's search attributes; it
      // completes once its push activity returns (the receiver has the push a moment before).
      const run = await waitFor("the cancel's run to complete", async () => {
        const described = await workflows.client.workflow.getHandle(a2aTaskWorkflowIdOf(task.id)).describe();
        return described.type === 'a2aTaskCancelWorkflow' && described.status.name !== 'RUNNING' && described;
      });
      expect(run).toMatchObject({ type: 'a2aTaskCancelWorkflow', status: { name: 'COMPLETED' } });
      expect(run.typedSearchAttributes.get(a2aSearchAttributes.state)).toBe('canceled');
      await expect(client.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toBeInstanceOf(
        TaskNotCancelableError,
      );
    } finally {
      await workflows.close();
    }
  });

  it('seals at boot a config stored in the clear by an earlier version, which is pushed as before', async () => {
    const client = await clientOf(tenantA);
    const key = randomUUID();
    const task = await started(client, `hold:${key}`);
    await waitFor(
      'the task working at the mesh',
      async () =>
        agent.isHeld(key) &&
        (await client.getTask({ tenant: '', id: task.id, historyLength: 0 })).status?.state ===
          TaskState.TASK_STATE_WORKING,
    );
    // As an earlier version stored it: token and credentials in the clear.
    await instance.deps.db.query(
      `INSERT INTO a2a_push_configs (task_id, id, tenant, url, token, authentication, wire_version, pushed_version)
       SELECT id, 'clear', tenant, $2, 'clear-token', '{"scheme":"Basic","credentials":"clear-creds"}', '1.0', version FROM a2a_tasks WHERE id = $1`,
      [task.id, receiver.url],
    );
    const box = SecretBox.fromConfig(config);
    const report = await sealStoredSecrets(instance.deps.db, box);
    expect(report.sealed).toBeGreaterThanOrEqual(1);
    const [row] = await instance.deps.db.query(
      "SELECT token, authentication FROM a2a_push_configs WHERE task_id = $1 AND id = 'clear'",
      [task.id],
    );
    expect([
      SecretBox.isSealed(row.token),
      SecretBox.isSealed(row.authentication.credentials),
      row.authentication.scheme,
    ]).toEqual([true, true, 'Basic']);
    expect(await new PushConfigStore(instance.deps.db, box).get(tenantA, task.id, 'clear')).toMatchObject({
      token: 'clear-token',
      authentication: { scheme: 'Basic', credentials: 'clear-creds' },
    });
    await instance.deps.temporal.client.workflow.getHandle(a2aTaskWorkflowIdOf(task.id)).signal(pushConfiguredSignal);
    agent.release(key);
    const pushes = await settled(task.id, 'TASK_STATE_COMPLETED');
    // A config with authentication sends it (its token is not sent: task-pushes.ts).
    expect(pushes[pushes.length - 1].request.headers.authorization).toBe('Basic clear-creds');
    // Nothing left to seal: a second pass changes nothing.
    expect(await sealStoredSecrets(instance.deps.db, box)).toMatchObject({ sealed: 0, resealed: 0, unreadable: 0 });
  });

  it('retries a receiver that fails (500 twice), with the same webhook-id, and still delivers every update in order', async () => {
    const client = await clientOf(tenantA);
    const key = randomUUID();
    let failures = 0;
    const answered = new Map<ReceivedRequest, number>();
    receiver.status = (request) => {
      const status =
        String(request.headers['webhook-id'] ?? '').startsWith(`${taskId}:`) && failures < 2 ? (failures++, 500) : 200;
      answered.set(request, status);
      return status;
    };
    let taskId = '';
    const task = await started(client, `hold:${key}`, { url: receiver.url!, token: 'retry-token' });
    taskId = task.id;
    await waitFor('the working update delivered', () =>
      [...answered].some(
        ([r, s]) => s === 200 && pushesOf(task.id).find((p) => p.request === r)?.state === 'TASK_STATE_WORKING',
      ),
    );
    await release(key);
    await waitFor('the completion delivered', () =>
      [...answered].some(
        ([r, s]) => s === 200 && pushesOf(task.id).find((p) => p.request === r)?.state === 'TASK_STATE_COMPLETED',
      ),
    );

    const all = pushesOf(task.id);
    const failed = all.filter((p) => answered.get(p.request) === 500);
    const acknowledged = all.filter((p) => answered.get(p.request) === 200);
    expect(failed).toHaveLength(2);
    // The failed attempts were tried again under the same id, and acknowledged.
    for (const f of failed)
      expect(acknowledged.map((a) => a.request.headers['webhook-id'])).toContain(f.request.headers['webhook-id']);
    const versions = acknowledged.map((p) => p.version);
    expect(versions).toEqual([...new Set(versions)].sort((a, b) => a - b));
    expect(acknowledged.map((p) => p.state).filter((s) => s !== 'TASK_STATE_SUBMITTED')).toEqual([
      'TASK_STATE_WORKING',
      'TASK_STATE_COMPLETED',
    ]);
  });

  it('gives a push up after the attempt limit (5 here, each under one webhook-id), and removes a config answered 410', async () => {
    const client = await clientOf(tenantA);
    const key = randomUUID();
    receiver.status = (request) => (request.path.includes('down') ? 500 : request.path.includes('gone') ? 410 : 200);
    const task = await started(client, `hold:${key}`, { id: 'down', url: `${receiver.url}?down` });
    await waitFor(
      'the task working at the mesh',
      async () =>
        (await client.getTask({ tenant: '', id: task.id, historyLength: 0 })).status?.state ===
        TaskState.TASK_STATE_WORKING,
    );
    await client.createTaskPushNotificationConfig({
      tenant: '',
      id: 'gone',
      taskId: task.id,
      url: `${receiver.url}?gone`,
      token: '',
      authentication: undefined,
    });
    await release(key);
    const configs = new PushConfigStore(instance.deps.db, SecretBox.fromConfig(config));
    // The 410 removes its config; the failing one is given up for the completion after its 5 attempts.
    const completed = await waitFor('the completion given up', async () => {
      const [down] = await configs.ofTask(tenantA, task.id);
      const now = await client.getTask({ tenant: '', id: task.id, historyLength: 0 });
      return (
        now.status?.state === TaskState.TASK_STATE_COMPLETED &&
        down?.id === 'down' &&
        (await new A2ATaskStore(instance.deps.db).get(tenantA, task.id))!.version === down.pushedVersion &&
        down
      );
    });
    expect((await configs.ofTask(tenantA, task.id)).map((c) => c.id)).toEqual(['down']);
    const attempts = new Map<string, number>();
    for (const { request } of pushesOf(task.id).filter((p) => p.request.path.includes('down'))) {
      const id = String(request.headers['webhook-id']);
      attempts.set(id, (attempts.get(id) ?? 0) + 1);
    }
    expect(attempts.get(`${task.id}:down:${completed.pushedVersion}`)).toBe(5);
    expect([...attempts.values()].every((n) => n === 5)).toBe(true);
    expect(pushesOf(task.id).filter((p) => p.request.path.includes('gone'))).toHaveLength(1);
  });

  /** The tenant's push dead letters of a task (`state`: dead, resolved or all), through the gateway's API. */
  const api = (tenant: string, method: string, path: string) => callAs(tenant, instance.url!, method, path);
  const lettersOf = async (tenant: string, taskId: string, state = 'all') => {
    const page = await api(tenant, 'GET', `/a2a/push-dead-letters?taskId=${taskId}&state=${state}`);
    expect(page.status).toBe(200);
    return page.body!.items as {
      id: string;
      configId: string;
      taskVersion: number;
      taskState: string;
      attempts: number;
      lastHttpStatus: number | null;
      resolution: string | null;
      resolvedVersion: number | null;
    }[];
  };

  it('dead-letters a push given up; a redelivery sends the task as it is now and resolves the letters up to it', async () => {
    const client = await clientOf(tenantA);
    const key = randomUUID();
    let up = false;
    receiver.status = (request) => (request.path.includes('dl') && !up ? 500 : 200);
    const task = await started(client, `hold:${key}`, { id: 'dl', url: `${receiver.url}?dl` });
    // The working task's push given up first, then the completion's (changes close together are pushed as one).
    await waitFor('the working task dead-lettered', async () =>
      (await lettersOf(tenantA, task.id)).some((l) => l.taskState === 'working'),
    );
    await release(key);
    const store = new A2ATaskStore(instance.deps.db);
    // Every change's push is given up (5 attempts each); the completion's last.
    const final = await waitFor('the completion dead-lettered', async () => {
      const now = await store.get(tenantA, task.id);
      const letters = await lettersOf(tenantA, task.id);
      return now?.state === 'completed' && letters.some((l) => l.taskVersion === now.version) && { now, letters };
    });
    expect(final.letters.length).toBeGreaterThanOrEqual(2);
    // Each: 5 attempts, the last answered HTTP 500 (its error shown if not), unresolved.
    expect(
      final.letters.map((l) => [
        l.configId,
        l.attempts,
        l.lastHttpStatus,
        (l as { lastError?: string }).lastError,
        l.resolution,
        l.resolvedVersion,
      ]),
    ).toEqual(final.letters.map(() => ['dl', 5, 500, 'HTTP 500', null, null]));
    expect(final.letters.map((l) => l.taskVersion)).toEqual(
      [...final.letters.map((l) => l.taskVersion)].sort((a, b) => a - b),
    );
    expect(final.letters.find((l) => l.taskVersion === final.now.version)!.taskState).toBe('completed');
    // Pages of one, oldest first, with cursors: every letter once.
    const paged: string[] = [];
    for (let cursor = '', pages = 0; ; pages++) {
      expect(pages).toBeLessThanOrEqual(final.letters.length);
      const page = await api(tenantA, 'GET', `/a2a/push-dead-letters?taskId=${task.id}&limit=1${cursor}`);
      expect(page.status).toBe(200);
      paged.push(...(page.body!.items as { id: string }[]).map((l) => l.id));
      if (page.body!.next === null) break;
      cursor = `&cursor=${String(page.body!.next)}`;
    }
    expect(paged).toEqual(final.letters.map((l) => l.id));
    const oldest = final.letters[0]!;

    // Still down: the redelivery is refused with the receiver's status, and the letter stays dead, one attempt more.
    const refused = await api(tenantA, 'POST', `/a2a/push-dead-letters/${oldest.id}/redeliver`);
    expect(refused).toMatchObject({ status: 502, body: { code: 'PUSH_NOT_DELIVERED', httpStatus: 500 } });
    expect(await api(tenantA, 'GET', `/a2a/push-dead-letters/${oldest.id}`)).toMatchObject({
      status: 200,
      body: { attempts: 6, resolution: null },
    });

    // Up again: the oldest letter's redelivery sends the task as it is now (completed), which resolves every letter.
    up = true;
    const before = pushesOf(task.id).length;
    const redelivered = await api(tenantA, 'POST', `/a2a/push-dead-letters/${oldest.id}/redeliver`);
    expect(redelivered).toMatchObject({
      status: 200,
      body: { id: oldest.id, resolution: 'redelivered', resolvedVersion: final.now.version },
    });
    const sent = pushesOf(task.id).slice(before);
    expect(sent.map((p) => [p.state, p.version])).toEqual([['TASK_STATE_COMPLETED', final.now.version]]);
    expect(
      new Webhook(signingSecret).verify(
        sent[0].request.body.toString('utf8'),
        sent[0].request.headers as Record<string, string>,
      ),
    ).toBeTruthy();
    expect(await lettersOf(tenantA, task.id, 'dead')).toEqual([]);
    expect((await lettersOf(tenantA, task.id, 'resolved')).map((l) => [l.resolution, l.resolvedVersion])).toEqual(
      final.letters.map(() => ['redelivered', final.now.version]),
    );
    const [dlConfig] = await new PushConfigStore(instance.deps.db, SecretBox.fromConfig(config)).ofTask(
      tenantA,
      task.id,
    );
    expect(dlConfig!.pushedVersion).toBe(final.now.version);
    expect(await api(tenantA, 'POST', `/a2a/push-dead-letters/${oldest.id}/redeliver`)).toMatchObject({
      status: 409,
      body: { code: 'DEAD_LETTER_RESOLVED' },
    });

    // Another tenant sees none of them; a removed letter is gone.
    expect(await api(tenantB, 'GET', `/a2a/push-dead-letters/${oldest.id}`)).toMatchObject({
      status: 404,
      body: { code: 'DEAD_LETTER_NOT_FOUND' },
    });
    expect(await lettersOf(tenantB, task.id)).toEqual([]);
    expect((await api(tenantB, 'DELETE', `/a2a/push-dead-letters/${oldest.id}`)).status).toBe(404);
    expect((await api(tenantA, 'DELETE', `/a2a/push-dead-letters/${oldest.id}`)).status).toBe(204);
    expect((await api(tenantA, 'GET', `/a2a/push-dead-letters/${oldest.id}`)).status).toBe(404);
  });

  it('resolves a dead letter as superseded once its receiver acknowledges a later version of the task', async () => {
    const client = await clientOf(tenantA);
    const key = randomUUID();
    let up = false;
    receiver.status = (request) => (request.path.includes('sup') && !up ? 500 : 200);
    const task = await started(client, `hold:${key}`, { id: 'sup', url: `${receiver.url}?sup` });
    const [dead] = await waitFor('a push of the task dead-lettered', async () => {
      const letters = await lettersOf(tenantA, task.id, 'dead');
      return letters.length > 0 && letters;
    });
    up = true;
    await release(key);
    const completed = await settled(task.id, 'TASK_STATE_COMPLETED');
    const version = completed.find((p) => p.state === 'TASK_STATE_COMPLETED')!.version;
    const resolved = await waitFor('the letter superseded', async () => {
      const letters = await lettersOf(tenantA, task.id, 'resolved');
      return letters.some((l) => l.id === dead.id) && letters;
    });
    // Resolved by the first version its receiver acknowledged after the letter's (the working state, or the completion).
    const letter = resolved.find((l) => l.id === dead.id)!;
    expect(letter.resolution).toBe('superseded');
    expect(letter.resolvedVersion).toBeGreaterThan(dead.taskVersion);
    expect(letter.resolvedVersion).toBeLessThanOrEqual(version);
    expect(pushesOf(task.id).some((p) => p.version === letter.resolvedVersion)).toBe(true);
    expect(await lettersOf(tenantA, task.id, 'dead')).toEqual([]);
  });

  it("resolves a config's dead letters as config-removed when the client removes it; set again under the same id, it starts with none", async () => {
    const client = await clientOf(tenantA);
    const key = randomUUID();
    receiver.status = (request) => (request.path.includes('rm-old') ? 500 : 200);
    const task = await started(client, `hold:${key}`, { id: 'rm', url: `${receiver.url}?rm-old` });
    const [dead] = await waitFor('a push to the old receiver dead-lettered', async () => {
      const letters = await lettersOf(tenantA, task.id, 'dead');
      return letters.length > 0 && letters;
    });
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'rm' });
    expect(await lettersOf(tenantA, task.id, 'dead')).toEqual([]);
    expect(
      (await lettersOf(tenantA, task.id, 'resolved')).map((l) => [l.id, l.configId, l.resolution, l.resolvedVersion]),
    ).toEqual([[dead.id, 'rm', 'config-removed', null]]);
    expect(await api(tenantA, 'POST', `/a2a/push-dead-letters/${dead.id}/redeliver`)).toMatchObject({
      status: 409,
      body: { code: 'DEAD_LETTER_RESOLVED', resolution: 'config-removed' },
    });

    // The same id again, at a receiver that answers: it gets the changes from now on, and none of the old letters.
    await client.createTaskPushNotificationConfig({
      tenant: '',
      id: 'rm',
      taskId: task.id,
      url: `${receiver.url}?rm-new`,
      token: '',
      authentication: undefined,
    });
    await release(key);
    const pushes = await settled(task.id, 'TASK_STATE_COMPLETED');
    expect(pushes.filter((p) => p.state === 'TASK_STATE_COMPLETED').map((p) => p.request.path)).toEqual([
      expect.stringContaining('rm-new'),
    ]);
    expect(await lettersOf(tenantA, task.id, 'dead')).toEqual([]);
    expect((await lettersOf(tenantA, task.id)).map((l) => l.id)).toEqual([dead.id]);

    // A letter the old config's push recorded as the config was removed (the removal's statement cannot see it) is
    // older than the config now under the id: its redelivery sends nothing, and resolves it config-removed.
    const late = randomUUID();
    await instance.deps.db.query(
      `INSERT INTO a2a_push_dead_letters (id, tenant, task_id, agent, config_id, url, task_version, task_state, attempts, last_error, dead_lettered_at)
       VALUES ($1, $2, $3, 'echo', 'rm', $4, 0, 'working', 5, 'HTTP 500', now() - interval '1 minute')`,
      [late, tenantA, task.id, `${receiver.url}?rm-old`],
    );
    const before = pushesOf(task.id).length;
    expect(await api(tenantA, 'POST', `/a2a/push-dead-letters/${late}/redeliver`)).toMatchObject({
      status: 409,
      body: { code: 'PUSH_CONFIG_GONE' },
    });
    expect(pushesOf(task.id)).toHaveLength(before);
    expect(await api(tenantA, 'GET', `/a2a/push-dead-letters/${late}`)).toMatchObject({
      status: 200,
      body: { resolution: 'config-removed' },
    });
  });

  it('a redelivery answered 410 removes the config: 409 PUSH_CONFIG_GONE, its letters resolved config-removed', async () => {
    const client = await clientOf(tenantA);
    const key = randomUUID();
    let answer = 500;
    receiver.status = (request) => (request.path.includes('g410') ? answer : 200);
    const task = await started(client, `hold:${key}`, { id: 'g410', url: `${receiver.url}?g410` });
    const [dead] = await waitFor('a push dead-lettered', async () => {
      const letters = await lettersOf(tenantA, task.id, 'dead');
      return letters.length > 0 && letters;
    });
    answer = 410;
    expect(await api(tenantA, 'POST', `/a2a/push-dead-letters/${dead.id}/redeliver`)).toMatchObject({
      status: 409,
      body: { code: 'PUSH_CONFIG_GONE', httpStatus: 410 },
    });
    expect(await api(tenantA, 'GET', `/a2a/push-dead-letters/${dead.id}`)).toMatchObject({
      status: 200,
      body: { resolution: 'config-removed', attempts: dead.attempts },
    });
    expect(await new PushConfigStore(instance.deps.db, SecretBox.fromConfig(config)).ofTask(tenantA, task.id)).toEqual(
      [],
    );
    await release(key);
  });

  it("purges push dead letters past the dead letters' retention, with the schedule dlq-retention", async () => {
    const client = await clientOf(tenantA);
    receiver.status = (request) => (request.path.includes('aged') ? 500 : 200);
    const [old, kept] = [
      await started(client, 'echo:aged 1', { id: 'aged', url: `${receiver.url}?aged` }),
      await started(client, 'echo:aged 2', { id: 'aged', url: `${receiver.url}?aged` }),
    ];
    for (const task of [old, kept])
      await waitFor(`the completion of ${task.id} dead-lettered`, async () =>
        (await lettersOf(tenantA, task.id)).some((l) => l.taskState === 'completed'),
      );
    // One task's letters dead-lettered 31 days ago (the retention is 30), the other's now.
    await instance.deps.db.query(
      `UPDATE a2a_push_dead_letters SET dead_lettered_at = now() - interval '31 days' WHERE task_id = $1`,
      [old.id],
    );
    await instance.deps.temporal.client.schedule.getHandle(DLQ_RETENTION_SCHEDULE_ID).trigger();
    await waitFor('the old letters purged', async () => (await lettersOf(tenantA, old.id)).length === 0, {
      timeoutMs: 30000,
      intervalMs: 250,
    });
    expect((await lettersOf(tenantA, kept.id)).length).toBeGreaterThan(0);
  });

  it('refuses a bad browse of the push dead letters with 400 naming the parameter, and an unknown letter with 404', async () => {
    for (const [query, field] of [
      ['state=bogus', 'state'],
      ['limit=0', 'limit'],
      ['limit=1001', 'limit'],
      ['limit=ten', 'limit'],
      ['cursor=nope', 'cursor'],
      [`cursor=${randomUUID()}`, 'cursor'],
      ['colour=red', 'colour'],
    ]) {
      const answer = await api(tenantA, 'GET', `/a2a/push-dead-letters?${query}`);
      expect({ query, status: answer.status, code: answer.body?.code, field: answer.body?.field }).toEqual({
        query,
        status: 400,
        code: 'INVALID_REQUEST',
        field,
      });
    }
    for (const id of ['not-a-uuid', randomUUID()]) {
      expect((await api(tenantA, 'GET', `/a2a/push-dead-letters/${id}`)).body).toMatchObject({
        code: 'DEAD_LETTER_NOT_FOUND',
      });
      expect((await api(tenantA, 'POST', `/a2a/push-dead-letters/${id}/redeliver`)).status).toBe(404);
    }
  });

  it('creates, reads, lists, pages and deletes configs: JSON-RPC v1.0 (stock client), the REST binding, v0.3 names', async () => {
    const client = await clientOf(tenantA);
    const task = await started(client, 'park');
    const hook = (id: string) => ({
      tenant: '',
      id,
      taskId: task.id,
      url: `${receiver.url}?c=${id}`,
      token: `t-${id}`,
      authentication: undefined,
    });
    for (const id of ['a', 'b', 'c']) await client.createTaskPushNotificationConfig(hook(id));
    expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'b' })).toMatchObject({
      id: 'b',
      taskId: task.id,
      url: `${receiver.url}?c=b`,
      token: 't-b',
    });
    const listed = await client.listTaskPushNotificationConfig({
      tenant: '',
      taskId: task.id,
      pageSize: 2,
      pageToken: '',
    });
    expect(listed.configs.map((c) => c.id)).toEqual(['a', 'b']);
    const next = await client.listTaskPushNotificationConfig({
      tenant: '',
      taskId: task.id,
      pageSize: 2,
      pageToken: listed.nextPageToken,
    });
    expect(next).toMatchObject({ configs: [{ id: 'c' }], nextPageToken: '' });
    // Replacing a config of the same id keeps one.
    await client.createTaskPushNotificationConfig({ ...hook('a'), url: `${receiver.url}?c=a2` });
    expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'a' })).toMatchObject({
      url: `${receiver.url}?c=a2`,
    });
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'a' });
    await expect(client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'a' })).rejects.toBeInstanceOf(
      TaskNotFoundError,
    );
    await expect(
      client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'a' }),
    ).rejects.toBeInstanceOf(TaskNotFoundError);

    // The HTTP+JSON binding, through the stock REST transport, then raw (201 and 204 as the SDK's handler answers).
    const rest = await restClientOf(tenantA);
    expect(await rest.createTaskPushNotificationConfig(hook('r'))).toMatchObject({ id: 'r', taskId: task.id });
    expect(
      (
        await rest.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' })
      ).configs.map((c) => c.id),
    ).toEqual(['b', 'c', 'r']);
    expect(await rest.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'r' })).toMatchObject({
      url: `${receiver.url}?c=r`,
    });
    await rest.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'r' });
    const base = `${instance.url}/a2a/agents/echo/rest/tasks/${task.id}/pushNotificationConfigs`;
    const restHeaders = { 'a2a-version': '1.0', 'content-type': 'application/json' };
    const posted = await fetchAs(tenantA)(base, {
      method: 'POST',
      headers: restHeaders,
      body: JSON.stringify({ id: 'raw', url: receiver.url }),
    });
    expect(posted.status).toBe(201);
    expect((await fetchAs(tenantA)(`${base}/raw`, { method: 'DELETE', headers: restHeaders })).status).toBe(204);
    expect((await fetchAs(tenantA)(`${base}/raw`, { method: 'GET', headers: restHeaders })).status).toBe(404);

    // v0.3 names (no A2A-Version header).
    const set = await rpc(tenantA, 'tasks/pushNotificationConfig/set', {
      taskId: task.id,
      pushNotificationConfig: { id: 'legacy', url: receiver.url, token: 'lt' },
    });
    expect(set.result).toMatchObject({
      taskId: task.id,
      pushNotificationConfig: { id: 'legacy', url: receiver.url, token: 'lt' },
    });
    expect(
      (await rpc(tenantA, 'tasks/pushNotificationConfig/get', { id: task.id, pushNotificationConfigId: 'legacy' }))
        .result,
    ).toMatchObject({ pushNotificationConfig: { id: 'legacy' } });
    const legacyList = await rpc(tenantA, 'tasks/pushNotificationConfig/list', { id: task.id });
    expect(JSON.stringify(legacyList.result)).toContain('legacy');
    expect(
      (await rpc(tenantA, 'tasks/pushNotificationConfig/delete', { id: task.id, pushNotificationConfigId: 'legacy' }))
        .error,
    ).toBeUndefined();
    expect(
      (await rpc(tenantA, 'GetTaskPushNotificationConfig', { taskId: task.id, id: 'legacy' }, '1.0')).error?.code,
    ).toBe(-32001);
  });

  it('pushes the v0.3 Task to a config set over v0.3', async () => {
    const client = await clientOf(tenantA);
    const key = randomUUID();
    const task = await started(client, `hold:${key}`);
    await waitFor(
      'the task working at the mesh',
      async () =>
        agent.isHeld(key) &&
        (await client.getTask({ tenant: '', id: task.id, historyLength: 0 })).status?.state ===
          TaskState.TASK_STATE_WORKING,
    );
    const set = await rpc(tenantA, 'tasks/pushNotificationConfig/set', {
      taskId: task.id,
      pushNotificationConfig: { url: receiver.url, token: 'v03' },
    });
    expect(set.error).toBeUndefined();
    agent.release(key);
    const [push] = await settled(task.id, 'completed');
    expect(push.body).toMatchObject({ kind: 'task', id: task.id, status: { state: 'completed' } });
    expect(push.request.headers['content-type']).toBe('application/json');
    expect(push.request.headers['x-a2a-notification-token']).toBe('v03');

    // v0.3 `message/send` with `configuration.pushNotificationConfig`.
    const sent = await rpc(tenantA, 'message/send', {
      message: {
        kind: 'message',
        messageId: randomUUID(),
        role: 'user',
        parts: [{ kind: 'text', text: 'echo:legacy' }],
      },
      configuration: { blocking: false, pushNotificationConfig: { url: receiver.url, token: 'v03-send' } },
    });
    const legacyId = String(sent.result?.id);
    const pushes = await settled(legacyId, 'completed');
    expect(pushes[pushes.length - 1].body).toMatchObject({
      kind: 'task',
      id: legacyId,
      status: { state: 'completed' },
    });
    expect(pushes.every((p) => p.request.headers['x-a2a-notification-token'] === 'v03-send')).toBe(true);
  });

  it("shows another tenant's task as not found (-32001, REST 404), and stores nothing for it", async () => {
    const task = await started(await clientOf(tenantA), 'park');
    await (
      await clientOf(tenantA)
    ).createTaskPushNotificationConfig({
      tenant: '',
      id: 'mine',
      taskId: task.id,
      url: receiver.url!,
      token: '',
      authentication: undefined,
    });
    const other = await clientOf(tenantB);
    await expect(
      other.createTaskPushNotificationConfig({
        tenant: '',
        id: 'theirs',
        taskId: task.id,
        url: receiver.url!,
        token: '',
        authentication: undefined,
      }),
    ).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(
      other.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'mine' }),
    ).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(
      other.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }),
    ).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(
      other.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'mine' }),
    ).rejects.toBeInstanceOf(TaskNotFoundError);
    const rest = await fetchAs(tenantB)(
      `${instance.url}/a2a/agents/echo/rest/tasks/${task.id}/pushNotificationConfigs/mine`,
      { headers: { 'a2a-version': '1.0' } },
    );
    expect(rest.status).toBe(404);
    expect(
      (await new PushConfigStore(instance.deps.db, SecretBox.fromConfig(config)).ofTask(tenantA, task.id)).map(
        (c) => c.id,
      ),
    ).toEqual(['mine']);
  });

  it('refuses a bad config with -32602 (REST 400): not http(s), no URL, half an authentication, a sink range refused', async () => {
    const client = await clientOf(tenantA);
    const task = await started(client, 'park');
    const bad = (over: Partial<TaskPushNotificationConfig>) => ({
      tenant: '',
      id: 'bad',
      taskId: task.id,
      url: receiver.url!,
      token: '',
      authentication: undefined,
      ...over,
    });
    for (const config of [
      bad({ url: 'ftp://127.0.0.1/hook' }),
      bad({ url: 'not a url' }),
      bad({ url: '' }),
      bad({ authentication: { scheme: 'Bearer', credentials: '' } }),
      bad({ url: 'http://169.254.169.254/latest' }),
      bad({ url: 'http://10.1.2.3/hook' }),
    ]) {
      await expect(client.createTaskPushNotificationConfig(config)).rejects.toBeInstanceOf(RequestMalformedError);
    }
    const answer = await rpc(
      tenantA,
      'CreateTaskPushNotificationConfig',
      { taskId: task.id, url: 'http://192.168.1.1/' },
      '1.0',
    );
    expect(answer.error).toMatchObject({ code: -32602, message: expect.stringContaining('private') });
    const rest = await fetchAs(tenantA)(
      `${instance.url}/a2a/agents/echo/rest/tasks/${task.id}/pushNotificationConfigs`,
      {
        method: 'POST',
        headers: { 'a2a-version': '1.0', 'content-type': 'application/json' },
        body: JSON.stringify({ url: 'gopher://x' }),
      },
    );
    expect(rest.status).toBe(400);
    // A send whose config is refused creates no task.
    const before = (await rpc(tenantA, 'ListTasks', {}, '1.0')).result?.totalSize;
    await expect(client.sendMessage(send('echo:x', { url: 'http://169.254.169.254/' }))).rejects.toBeInstanceOf(
      RequestMalformedError,
    );
    expect((await rpc(tenantA, 'ListTasks', {}, '1.0')).result?.totalSize).toBe(before);
    expect(await new PushConfigStore(instance.deps.db, SecretBox.fromConfig(config)).ofTask(tenantA, task.id)).toEqual(
      [],
    );
  });

  it('refuses a URL whose host resolves to a private address before connecting anywhere', async () => {
    const resolved: string[] = [];
    // The name resolves to the receiver's loopback address and to a private one: every address is checked.
    const guard = new SinkGuard(['loopback'], async (hostname) => {
      resolved.push(hostname);
      return [
        { address: '127.0.0.1', family: 4 },
        { address: '10.20.30.40', family: 4 },
      ];
    });
    const tasks = new A2ATaskStore(instance.deps.db);
    const task = await tasks.create({
      id: randomUUID(),
      tenant: tenantA,
      agent: 'echo',
      contextId: randomUUID(),
      history: [],
      metadata: {},
    });
    const configs = new PushConfigStore(instance.deps.db, SecretBox.fromConfig(config));
    const methods = new PushConfigMethods({
      find: async (id) => (await tasks.get(tenantA, id))!,
      configs,
      checkUrl: (url) => guard.check(url),
      workflows: new TaskWorkflows(instance.deps.temporal.client, { timeoutMs: 10_000, callTimeoutMs: 1000 }),
    });
    const port = new URL(receiver.url!).port;
    const before = receiver.requests.length;
    const refused = methods.create(
      {
        tenant: '',
        id: 'p',
        taskId: task.id,
        url: `http://hooks.internal.test:${port}/hook`,
        token: '',
        authentication: undefined,
      },
      new ServerCallContext({ requestedVersion: '1.0' }),
    );
    await expect(refused).rejects.toBeInstanceOf(RequestMalformedError);
    await expect(refused).rejects.toThrow(/private/);
    expect(resolved).toEqual(['hooks.internal.test']);
    expect(await configs.ofTask(tenantA, task.id)).toEqual([]);
    expect(receiver.requests.length).toBe(before);
  });
  it('a push outlives the worker sending it: another instance pushes it again (same webhook-id) until acknowledged', async () => {
    // The last case: only worker instances of this case run tasks from here on (the first instance keeps its gateway).
    await instance.worker!.stop();
    const workerOnly = (name: string) =>
      startInstance(testConfig({ ...env, EVENTMESH_INSTANCE_ID: `${name}-${suffix}` }), { roles: ['worker'] });
    const first = await workerOnly('a2a-push-w1');
    let second: RunningInstance | undefined;
    let answer: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (answer = resolve));
    try {
      const client = await clientOf(tenantA);
      const key = randomUUID();
      const task = await started(client, `hold:${key}`, { url: receiver.url!, token: 'crash' });
      // The receiver takes the completion but does not answer: the push is in flight when its worker stops.
      const isCompletion = (r: ReceivedRequest) =>
        String(r.headers['webhook-id'] ?? '').startsWith(`${task.id}:`) &&
        r.body.toString('utf8').includes('TASK_STATE_COMPLETED');
      receiver.gate = (r) => (isCompletion(r) ? held : undefined);
      await release(key);
      const [taken] = await waitFor(
        'the completion taken by the receiver',
        () => receiver.requests.filter(isCompletion).length === 1 && receiver.requests.filter(isCompletion),
      );
      await first.close();
      receiver.gate = undefined;
      second = await workerOnly('a2a-push-w2');
      const again = await waitFor(
        'the completion pushed again',
        () => receiver.requests.filter(isCompletion).length >= 2 && receiver.requests.filter(isCompletion),
        { timeoutMs: 30_000 },
      );
      expect(again.map((r) => r.headers['webhook-id'])).toEqual(again.map(() => taken.headers['webhook-id']));
      await waitFor('the completion recorded as pushed', async () => {
        const [pushed] = await new PushConfigStore(instance.deps.db, SecretBox.fromConfig(config)).ofTask(
          tenantA,
          task.id,
        );
        return pushed.pushedVersion === (await new A2ATaskStore(instance.deps.db).get(tenantA, task.id))!.version;
      });
    } finally {
      answer();
      await first.close().catch(() => undefined);
      await second?.close();
      const { client, close } = await temporalClient();
      await terminateWorkflows(client, [`dispatch/a2a-push-w1-${suffix}`, `dispatch/a2a-push-w2-${suffix}`]);
      await close();
    }
  });
});
