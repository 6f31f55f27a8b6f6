import { randomUUID } from 'node:crypto';
import { AgentCard, Message, SendMessageRequest, Task, TaskState } from '@a2a-js/sdk';
import {
  Client,
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import {
  ContentTypeNotSupportedError,
  InvalidAgentResponseError,
  TaskNotCancelableError,
  TaskNotFoundError,
} from '@a2a-js/sdk/errors';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { AGENT_CATALOG_EXTENSION } from '@libs/a2a';
import { A2ATaskEntity } from '@libs/storage';
import { A2A_TASK_RETENTION_SCHEDULE_ID } from '@libs/temporal';
import { endTaskWorkflows, taskCountOf } from '../support/a2a-tasks';
import { EchoAgent, textOf } from '../support/a2a-echo-agent';
import { testConfig, uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';
import { headerTenantGate } from '../support/header-tenant-gate';

/**
 * The A2A broker on a real instance (gateway and worker: the task workflows run on it) with Postgres, Kafka and
 * Temporal, driven by the SDK's stock client (ClientFactory from the card URL the mesh serves), relaying to an agent
 * built from the SDK's server pieces on loopback (test/support/a2a-echo-agent.ts). A blocking send waits at most
 * EVENTMESH_AGENTS_SEND_WAIT_MS (1.5 s here) for its task to settle, so a `park` task is answered `working`.
 */
/** The most the broker reads of an agent's answer here: far above any answer of these tests but `huge:`'s. */
const MAX_ANSWER_BYTES = 64 * 1024;

describe('A2A broker (real Postgres, stock @a2a-js/sdk client)', () => {
  const suffix = randomUUID().slice(0, 8);
  const [tenantA, tenantB, tenantC] = [`a2a-a-${suffix}`, `a2a-b-${suffix}`, `a2a-c-${suffix}`];
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `a2a-${suffix}`,
    EVENTMESH_KAFKA_TOPICS: uniqueTopic('a2a'),
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
    EVENTMESH_AGENTS_CALL_TIMEOUT_MS: '5000',
    EVENTMESH_AGENTS_SEND_WAIT_MS: '1500',
    EVENTMESH_AGENTS_MAX_ANSWER_BYTES: String(MAX_ANSWER_BYTES),
  });
  const gateOf = (name: string) => headerTenantGate(name);
  const gates = { ingress: gateOf('ingress'), admin: gateOf('admin'), close: async () => undefined };
  const agent = new EchoAgent();
  let instance: RunningInstance;

  beforeAll(async () => {
    await agent.start();
    instance = await startInstance(config, { roles: ['gateway', 'worker'], gates });
    for (const tenant of [tenantA, tenantB, tenantC])
      expect((await call(tenant, 'PUT', '/a2a/agents/echo', agent.card())).status).toBe(201);
  });
  afterAll(async () => {
    await endTaskWorkflows([tenantA, tenantB, tenantC]);
    await instance?.close();
    await agent.close();
  });

  const headersOf = (tenant: string) => ({ 'x-test-tenant': tenant });
  const call = async (
    tenant: string,
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: Record<string, unknown> | null }> => {
    const response = await fetch(`${instance.url}${path}`, {
      method,
      headers: { ...headersOf(tenant), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) };
  };
  /** A raw JSON-RPC call of the agent's endpoint: the body as given, the A2A-Version header if any. */
  const rpc = async (
    tenant: string,
    body: string,
    version?: string,
  ): Promise<{
    status: number;
    body: { id?: unknown; result?: Record<string, unknown>; error?: { code: number; message: string } };
  }> => {
    const response = await fetch(`${instance.url}/a2a/agents/echo/rpc`, {
      method: 'POST',
      headers: {
        ...headersOf(tenant),
        'content-type': 'application/json',
        ...(version ? { 'a2a-version': version } : {}),
      },
      body,
    });
    return { status: response.status, body: (await response.json()) as never };
  };
  const cardUrl = (name = 'echo') => `${instance.url}/a2a/agents/${name}/.well-known/agent-card.json`;
  /** The stock client's fetch, with the tenant's credentials (what a real client's token does). */
  const fetchAs = (tenant: string): typeof fetch =>
    ((input: string | URL | Request, init?: RequestInit) =>
      fetch(input, {
        ...init,
        headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), ...headersOf(tenant) },
      })) as typeof fetch;
  /** A stock v1.0 client, built from the card URL alone. */
  const clientOf = (tenant: string): Promise<Client> =>
    new ClientFactory({
      transports: [new JsonRpcTransportFactory({ fetchImpl: fetchAs(tenant) })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetchAs(tenant) }),
    }).createFromUrl(cardUrl(), '');
  /** A stock v1.0 client of the HTTP+JSON binding, built from the card URL alone. */
  const restClientOf = (tenant: string): Promise<Client> =>
    new ClientFactory({
      transports: [new RestTransportFactory({ fetchImpl: fetchAs(tenant) })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetchAs(tenant) }),
    }).createFromUrl(cardUrl(), '');
  /** A stock v0.3 client: the card's v0.3 interface, the SDK's compat transport. */
  const legacyClientOf = async (tenant: string): Promise<Client> => {
    const card = AgentCard.fromJSON(await (await fetchAs(tenant)(cardUrl())).json());
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
  const asTask = (answer: Message | Task): Task => {
    expect('status' in answer).toBe(true);
    return answer as Task;
  };
  const artifactText = (task: Task) => task.artifacts.map((a) => textOf({ parts: a.parts } as Message));

  describe('agents registry', () => {
    it('refuses a bad card with 400 {code, message} naming the field', async () => {
      const { supportedInterfaces: _, ...noInterfaces } = agent.card();
      expect(await call(tenantA, 'PUT', '/a2a/agents/bad', noInterfaces)).toMatchObject({
        status: 400,
        body: {
          code: 'INVALID_AGENT_CARD',
          field: 'supportedInterfaces',
          message: expect.stringContaining('supportedInterfaces'),
        },
      });
      const grpcOnly = {
        ...agent.card(),
        supportedInterfaces: [{ url: agent.url, protocolBinding: 'GRPC', protocolVersion: '1.0' }],
      };
      expect(await call(tenantA, 'PUT', '/a2a/agents/bad', grpcOnly)).toMatchObject({
        status: 400,
        body: { code: 'INVALID_AGENT_CARD', message: expect.stringContaining('JSONRPC') },
      });
      const badUrl = {
        ...agent.card(),
        supportedInterfaces: [{ url: 'ftp://x/', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      };
      expect(await call(tenantA, 'PUT', '/a2a/agents/bad', badUrl)).toMatchObject({
        status: 400,
        body: { code: 'INVALID_AGENT_CARD', field: 'supportedInterfaces.0.url' },
      });
      expect(await call(tenantA, 'PUT', '/a2a/agents/bad', 'not a card')).toMatchObject({
        status: 400,
        body: { code: 'INVALID_AGENT_CARD' },
      });
      expect(await call(tenantA, 'PUT', '/a2a/agents/bad%20name', agent.card())).toMatchObject({
        status: 400,
        body: { code: 'INVALID_REQUEST', field: 'name' },
      });
      expect((await call(tenantA, 'GET', '/a2a/agents/bad')).status).toBe(404);
    });

    it('refuses an agent URL the sink rules refuse (link-local, metadata)', async () => {
      const metadata = {
        ...agent.card(),
        supportedInterfaces: [{ url: 'http://169.254.169.254/', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      };
      expect(await call(tenantA, 'PUT', '/a2a/agents/meta', metadata)).toMatchObject({
        status: 400,
        body: { code: 'SINK_NOT_ALLOWED' },
      });
    });

    it('registers, replaces, reads, lists by skill and tag, and removes, per tenant', async () => {
      const other = {
        ...agent.card(),
        name: 'other',
        skills: [{ id: 'sum', name: 'Sum', description: 'adds', tags: ['math'] }],
      };
      expect((await call(tenantA, 'PUT', '/a2a/agents/other', other)).status).toBe(201);
      expect(await call(tenantA, 'PUT', '/a2a/agents/other', { ...other, description: 'adds numbers' })).toMatchObject({
        status: 200,
        body: { name: 'other', card: { description: 'adds numbers' } },
      });
      expect(await call(tenantA, 'GET', '/a2a/agents/other')).toMatchObject({
        status: 200,
        body: { name: 'other', card: { skills: [{ id: 'sum' }] } },
      });
      const names = async (query: string) =>
        ((await call(tenantA, 'GET', `/a2a/agents${query}`)).body!.agents as { name: string }[]).map((a) => a.name);
      expect(await names('')).toEqual(['echo', 'other']);
      expect(await names('?skill=sum')).toEqual(['other']);
      expect(await names('?tag=test')).toEqual(['echo']);
      expect(await names('?tag=none')).toEqual([]);
      // Another tenant: the same 404 as a missing agent, and not listed.
      expect(await call(tenantB, 'GET', '/a2a/agents/other')).toMatchObject({
        status: 404,
        body: { code: 'AGENT_NOT_FOUND', message: 'no agent other' },
      });
      expect((await call(tenantB, 'DELETE', '/a2a/agents/other')).status).toBe(404);
      expect((await call(tenantB, 'GET', '/a2a/agents?skill=sum')).body).toEqual({ agents: [] });
      expect((await call(tenantA, 'DELETE', '/a2a/agents/other')).status).toBe(204);
      expect((await call(tenantA, 'GET', '/a2a/agents/other')).status).toBe(404);
    });

    it("serves the card rewritten to the mesh's endpoints with the gate's security schemes", async () => {
      const { status, body } = await call(tenantA, 'GET', '/a2a/agents/echo/.well-known/agent-card.json');
      expect(status).toBe(200);
      const rpcUrl = `${instance.url}/a2a/agents/echo/rpc`;
      expect(body).toMatchObject({
        name: 'echo',
        supportedInterfaces: [
          { url: rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
          { url: `${instance.url}/a2a/agents/echo/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
          { url: rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
          { url: `${instance.url}/a2a/agents/echo/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '0.3' },
        ],
        securitySchemes: {
          bearer: { httpAuthSecurityScheme: { scheme: 'Bearer' } },
          apiKey: { apiKeySecurityScheme: { name: 'x-api-key' } },
        },
        skills: [{ id: 'echo' }],
      });
      expect(JSON.stringify(body)).not.toContain(agent.url);
      expect((await call(tenantB, 'GET', '/a2a/agents/nope/.well-known/agent-card.json')).status).toBe(404);
    });
  });

  describe('JSON-RPC v1.0 through the stock client', () => {
    it('relays a blocking SendMessage and records the task under the mesh id and the tenant', async () => {
      const client = await clientOf(tenantA);
      const task = asTask(await client.sendMessage(send('echo:hello')));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(artifactText(task)).toEqual(['hello']);
      expect(textOf(task.status?.message)).toBe('echoed hello');
      expect((await client.getTask({ tenant: '', id: task.id, historyLength: undefined })).status?.state).toBe(
        TaskState.TASK_STATE_COMPLETED,
      );
      const row = await instance.deps.db.getRepository(A2ATaskEntity).findOneByOrFail({ id: task.id });
      expect(row).toMatchObject({ tenant: tenantA, agent: 'echo', state: 'completed' });
      expect(row.agentTaskId).toBeTruthy();
      expect(row.agentTaskId).not.toBe(task.id);
    });

    it('answers -32006 to a blocking send whose agent answered what is not A2A; the task failed, saying why, sent once', async () => {
      const client = await clientOf(tenantA);
      const sent = agent.received.length;
      await expect(client.sendMessage(send('garble:one'))).rejects.toBeInstanceOf(InvalidAgentResponseError);
      const raw = await rpc(
        tenantA,
        JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'SendMessage',
          params: SendMessageRequest.toJSON(send('garble:two')),
        }),
        '1.0',
      );
      expect(raw.body.error).toMatchObject({
        code: -32006,
        message: expect.stringContaining("the agent's answer is not a valid A2A answer: Invalid response"),
      });
      const taskId = /"taskId":"([0-9a-f-]{36})"/.exec(JSON.stringify(raw.body.error))?.[1];
      expect(taskId).toBeDefined();
      const task = await client.getTask({ tenant: '', id: taskId!, historyLength: undefined });
      expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
      expect(textOf(task.status?.message)).toContain('not a valid A2A answer');
      // Failed at the first answer, not sent again until the task's timeout: the agent got each send once.
      const rest = await fetch(`${instance.url}/a2a/agents/echo/rest/message:send`, {
        method: 'POST',
        headers: { ...headersOf(tenantA), 'content-type': 'application/json', 'a2a-version': '1.0' },
        body: JSON.stringify(SendMessageRequest.toJSON(send('garble:four'))),
      });
      expect(rest.status).toBe(500);
      expect(JSON.stringify(await rest.json())).toContain('INVALID_AGENT_RESPONSE');
      expect(agent.received.slice(sent)).toEqual(['garble:one', 'garble:two', 'garble:four']);
      // returnImmediately: the task is the answer; it fails behind it.
      const later = asTask(await client.sendMessage(send('garble:three', { returnImmediately: true })));
      await waitFor(
        'the task failed',
        async () =>
          (await client.getTask({ tenant: '', id: later.id, historyLength: undefined })).status?.state ===
          TaskState.TASK_STATE_FAILED,
      );
    });

    it('aborts the read of an answer larger than EVENTMESH_AGENTS_MAX_ANSWER_BYTES: the task failed, saying so, sent once', async () => {
      const client = await clientOf(tenantA);
      const sent = agent.received.length;
      const raw = await rpc(
        tenantA,
        JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'SendMessage',
          params: SendMessageRequest.toJSON(send(`huge:${4 * MAX_ANSWER_BYTES}`)),
        }),
        '1.0',
      );
      const why = `the agent's answer is larger than the mesh reads (EVENTMESH_AGENTS_MAX_ANSWER_BYTES = ${MAX_ANSWER_BYTES} bytes); the read was aborted`;
      expect(raw.body.error).toMatchObject({ code: -32006, message: expect.stringContaining(why) });
      const taskId = /"taskId":"([0-9a-f-]{36})"/.exec(JSON.stringify(raw.body.error))?.[1];
      expect(taskId).toBeDefined();
      const task = await client.getTask({ tenant: '', id: taskId!, historyLength: undefined });
      expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
      expect(textOf(task.status?.message)).toBe(why);
      // Failed at once, not sent again (the agent would answer the same).
      expect(agent.received.slice(sent)).toEqual([`huge:${4 * MAX_ANSWER_BYTES}`]);
    });

    it('relays a Message answer as a Message', async () => {
      const answer = await (await clientOf(tenantA)).sendMessage(send('reply:hi'));
      expect('messageId' in answer && textOf(answer)).toBe('hi');
    });

    it('answers a returnImmediately SendMessage at once; the task completes behind it', async () => {
      const client = await clientOf(tenantA);
      const key = randomUUID();
      const task = asTask(await client.sendMessage(send(`hold:${key}`, { returnImmediately: true })));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
      await waitFor('the agent holding the task', () => agent.isHeld(key));
      await waitFor(
        'the task recorded working',
        async () =>
          (await client.getTask({ tenant: '', id: task.id, historyLength: undefined })).status?.state ===
          TaskState.TASK_STATE_WORKING,
      );
      agent.release(key);
      const done = await waitFor('the task completed', async () => {
        const now = await client.getTask({ tenant: '', id: task.id, historyLength: undefined });
        return now.status?.state === TaskState.TASK_STATE_COMPLETED && now;
      });
      expect(artifactText(done)).toEqual([`hold:${key}`]);
    });

    it('cancels at the agent a task the agent reported working; a second cancel is refused', async () => {
      const client = await clientOf(tenantA);
      const task = asTask(await client.sendMessage(send('park')));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_WORKING);
      const canceled = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
      expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      await expect(client.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toBeInstanceOf(
        TaskNotCancelableError,
      );
      const done = asTask(await client.sendMessage(send('echo:done')));
      await expect(client.cancelTask({ tenant: '', id: done.id, metadata: undefined })).rejects.toBeInstanceOf(
        TaskNotCancelableError,
      );
    });

    it('a cancel that wins the race with the completion stands: the late completion is dropped', async () => {
      const client = await clientOf(tenantA);
      const key = randomUUID();
      const task = asTask(await client.sendMessage(send(`hold:${key}`, { returnImmediately: true })));
      await waitFor('the agent holding the task', () => agent.isHeld(key));
      expect((await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })).status?.state).toBe(
        TaskState.TASK_STATE_CANCELED,
      );
      agent.release(key);
      await waitFor('the agent completing its task', () => agent.completed.has(key));
      // The workflow ended with the cancel (canceled at the agent and in Postgres): the completion is not recorded.
      await waitFor(
        'the task workflow ended',
        async () =>
          (await instance.deps.temporal.client.workflow.getHandle(`a2a-task/${task.id}`).describe()).status.name ===
          'COMPLETED',
      );
      const row = await instance.deps.db.getRepository(A2ATaskEntity).findOneByOrFail({ id: task.id });
      expect(row).toMatchObject({ state: 'canceled', artifacts: [] });
      expect((await client.getTask({ tenant: '', id: task.id, historyLength: undefined })).status?.state).toBe(
        TaskState.TASK_STATE_CANCELED,
      );
    });

    it("pages ListTasks with a cursor, newest first, only the tenant's", async () => {
      const client = await clientOf(tenantC);
      const sent: string[] = [];
      for (let i = 0; i < 5; i++) sent.push(asTask(await client.sendMessage(send(`echo:${i}`))).id);
      const seen: string[] = [];
      let pageToken = '';
      const sizes: number[] = [];
      do {
        const page = await client.listTasks({
          tenant: '',
          contextId: '',
          status: TaskState.TASK_STATE_UNSPECIFIED,
          pageSize: 2,
          pageToken,
          historyLength: undefined,
          statusTimestampAfter: undefined,
          includeArtifacts: true,
        });
        expect(page.totalSize).toBe(5);
        sizes.push(page.tasks.length);
        seen.push(...page.tasks.map((t) => t.id));
        pageToken = page.nextPageToken;
      } while (pageToken !== '');
      expect(sizes).toEqual([2, 2, 1]);
      expect(seen).toEqual([...sent].reverse());
      const later = await client.listTasks({
        tenant: '',
        contextId: '',
        status: TaskState.TASK_STATE_COMPLETED,
        pageSize: 10,
        pageToken: '',
        historyLength: 0,
        statusTimestampAfter: new Date(Date.now() + 60_000).toISOString(),
        includeArtifacts: false,
      });
      expect(later.tasks).toEqual([]);
      const completed = await client.listTasks({
        tenant: '',
        contextId: '',
        status: TaskState.TASK_STATE_COMPLETED,
        pageSize: 10,
        pageToken: '',
        historyLength: 0,
        statusTimestampAfter: new Date(Date.now() - 60_000).toISOString(),
        includeArtifacts: false,
      });
      expect(completed.tasks.map((t) => [t.id, t.history.length, t.artifacts.length])).toEqual(
        [...sent].reverse().map((id) => [id, 0, 0]),
      );
      const other = await (
        await clientOf(tenantB)
      ).listTasks({
        tenant: '',
        contextId: '',
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: 10,
        pageToken: '',
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: false,
      });
      expect(other.tasks.map((t) => t.id)).not.toEqual(expect.arrayContaining([sent[0]]));
    });

    it('purges a task that ended longer ago than its retention, with the schedule a2a-task-retention', async () => {
      const schedule = instance.deps.temporal.client.schedule.getHandle(A2A_TASK_RETENTION_SCHEDULE_ID);
      expect((await schedule.describe()).action).toMatchObject({
        type: 'startWorkflow',
        workflowType: 'a2aTaskRetentionWorkflow',
        taskQueue: 'eventmesh-a2a',
        args: [{ retentionDays: 30 }],
      });
      const client = await clientOf(tenantA);
      const [old, recent] = [
        asTask(await client.sendMessage(send('echo:old'))),
        asTask(await client.sendMessage(send('echo:recent'))),
      ];
      // Its events on the events topic (or marked so by the sweep), the old task's last change 31 days ago.
      await waitFor(
        "the tasks' events published",
        async () =>
          (
            await instance.deps.db.query(
              'SELECT count(*) AS n FROM a2a_tasks WHERE id = ANY($1) AND event_seq <= published_seq',
              [[old.id, recent.id]],
            )
          )[0].n === '2',
        { timeoutMs: 30000 },
      );
      await instance.deps.db.query(`UPDATE a2a_tasks SET updated_at = now() - interval '31 days' WHERE id = $1`, [
        old.id,
      ]);
      await schedule.trigger();
      await waitFor(
        'the old task purged',
        () =>
          client.getTask({ tenant: '', id: old.id, historyLength: undefined }).then(
            () => false,
            (e: unknown) => e instanceof TaskNotFoundError,
          ),
        { timeoutMs: 30000, intervalMs: 250 },
      );
      expect((await client.getTask({ tenant: '', id: recent.id, historyLength: undefined })).status?.state).toBe(
        TaskState.TASK_STATE_COMPLETED,
      );
    });

    it("keeps tenants apart: another tenant's task id is not found, nor cancelable", async () => {
      const task = asTask(await (await clientOf(tenantA)).sendMessage(send('park')));
      const intruder = await clientOf(tenantB);
      await expect(intruder.getTask({ tenant: '', id: task.id, historyLength: undefined })).rejects.toBeInstanceOf(
        TaskNotFoundError,
      );
      await expect(intruder.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toBeInstanceOf(
        TaskNotFoundError,
      );
      expect(
        (await (await clientOf(tenantA)).getTask({ tenant: '', id: task.id, historyLength: undefined })).status?.state,
      ).toBe(TaskState.TASK_STATE_WORKING);
    });
  });

  describe('HTTP+JSON (REST) v1.0 through the stock client', () => {
    it('sends (blocking and returnImmediately), gets, lists and cancels', async () => {
      const client = await restClientOf(tenantA);
      expect(client.transport.protocolName).toBe('HTTP+JSON');
      const task = asTask(await client.sendMessage(send('echo:rest')));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(artifactText(task)).toEqual(['rest']);
      expect((await client.getTask({ tenant: '', id: task.id, historyLength: 0 })).history).toEqual([]);
      const key = randomUUID();
      const held = asTask(await client.sendMessage(send(`hold:${key}`, { returnImmediately: true })));
      expect(held.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
      await waitFor('the agent holding the task', () => agent.isHeld(key));
      expect((await client.cancelTask({ tenant: '', id: held.id, metadata: undefined })).status?.state).toBe(
        TaskState.TASK_STATE_CANCELED,
      );
      agent.release(key);
      await expect(client.cancelTask({ tenant: '', id: held.id, metadata: undefined })).rejects.toBeInstanceOf(
        TaskNotCancelableError,
      );
      const page = await client.listTasks({
        tenant: '',
        contextId: '',
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: 1,
        pageToken: '',
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: false,
      });
      expect(page.tasks.map((t) => t.id)).toEqual([held.id]);
      expect(page.nextPageToken).not.toBe('');
      const next = await client.listTasks({
        tenant: '',
        contextId: '',
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: 1,
        pageToken: page.nextPageToken,
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: false,
      });
      expect(next.tasks.map((t) => t.id)).toEqual([task.id]);
      await expect(
        (await restClientOf(tenantB)).getTask({ tenant: '', id: task.id, historyLength: undefined }),
      ).rejects.toBeInstanceOf(TaskNotFoundError);
    });

    it("answers in the binding's error shape: malformed body, unsupported version, a stream of an unknown task, unknown route", async () => {
      const post = (path: string, body: string, version: string | null = '1.0') =>
        fetch(`${instance.url}/a2a/agents/echo/rest/${path}`, {
          method: 'POST',
          headers: {
            ...headersOf(tenantA),
            'content-type': 'application/json',
            ...(version ? { 'a2a-version': version } : {}),
          },
          body,
        });
      const malformed = await post('message:send', '{');
      expect(malformed.status).toBe(400);
      expect(await malformed.json()).toMatchObject({ error: { code: 400, status: 'INVALID_ARGUMENT' } });
      const message = JSON.stringify({
        message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'echo:x' }] },
      });
      const unversioned = await post('message:send', message, null);
      expect(unversioned.status).toBe(400);
      expect(JSON.stringify(await unversioned.json())).toContain('VERSION_NOT_SUPPORTED');
      const streaming = await post(`tasks/${randomUUID()}:subscribe`, '');
      expect(streaming.status).toBe(404);
      expect(streaming.headers.get('content-type')).toMatch(/^application\/a2a\+json/);
      expect(JSON.stringify(await streaming.json())).toContain('TASK_NOT_FOUND');
      expect((await post('nowhere', message)).status).toBe(404);
    });
  });

  describe('an agent that goes away', () => {
    it('keeps a working task as recorded when the agent cannot be asked; a cancel says the agent could not be reached', async () => {
      const flaky = new EchoAgent();
      await flaky.start();
      try {
        expect((await call(tenantA, 'PUT', '/a2a/agents/flaky', flaky.card())).status).toBe(201);
        const at = (method: string, params: unknown) =>
          fetch(`${instance.url}/a2a/agents/flaky/rpc`, {
            method: 'POST',
            headers: { ...headersOf(tenantA), 'content-type': 'application/json', 'a2a-version': '1.0' },
            body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
          }).then(
            (r) =>
              r.json() as Promise<{
                result?: { task?: { id: string }; status?: { state: string } };
                error?: { code: number; message: string };
              }>,
          );
        const sent = await at('SendMessage', {
          message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'park' }] },
        });
        const id = sent.result!.task!.id;
        await flaky.close();
        expect((await at('GetTask', { id })).result?.status?.state).toBe('TASK_STATE_WORKING');
        expect((await at('CancelTask', { id })).error).toMatchObject({
          code: -32603,
          message: expect.stringContaining('could not be reached'),
        });
        expect((await at('GetTask', { id })).result?.status?.state).toBe('TASK_STATE_WORKING');
      } finally {
        await flaky.close();
      }
    });
  });

  describe('JSON-RPC v0.3 names (A2A-Version: 0.3, or absent and the name is not v1.0)', () => {
    it("sends, gets and cancels through the stock client's v0.3 transport", async () => {
      const client = await legacyClientOf(tenantA);
      expect(client.protocolVersion).toBe('0.3');
      const task = asTask(await client.sendMessage(send('echo:legacy')));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(artifactText(task)).toEqual(['legacy']);
      expect((await client.getTask({ tenant: '', id: task.id, historyLength: undefined })).id).toBe(task.id);
      const parked = asTask(await client.sendMessage(send('park')));
      expect((await client.cancelTask({ tenant: '', id: parked.id, metadata: undefined })).status?.state).toBe(
        TaskState.TASK_STATE_CANCELED,
      );
    });

    it('selects the names by the header: v0.3 names without it, v1.0 names with 1.0, not with 0.3', async () => {
      const legacy = JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'message/send',
        params: {
          message: {
            kind: 'message',
            messageId: randomUUID(),
            role: 'user',
            parts: [{ kind: 'text', text: 'echo:raw' }],
          },
        },
      });
      expect(await rpc(tenantA, legacy)).toMatchObject({
        status: 200,
        body: { id: 1, result: { kind: 'task', status: { state: 'completed' } } },
      });
      expect(await rpc(tenantA, legacy, '1.0')).toMatchObject({
        status: 200,
        body: { id: 1, error: { code: -32601 } },
      });
      const v1 = JSON.stringify({
        jsonrpc: '2.0',
        id: 'x',
        method: 'SendMessage',
        params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'echo:v1' }] } },
      });
      expect(await rpc(tenantA, v1, '1.0')).toMatchObject({
        body: { id: 'x', result: { task: { status: { state: 'TASK_STATE_COMPLETED' } } } },
      });
      expect(await rpc(tenantA, v1, '0.3')).toMatchObject({ body: { id: 'x', error: { code: -32601 } } });
    });

    it('serves a v1.0 name without the header as v1.0 (the name tells the version), raw and through a stock client', async () => {
      const v1 = JSON.stringify({
        jsonrpc: '2.0',
        id: 'y',
        method: 'SendMessage',
        params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'echo:unversioned' }] } },
      });
      expect(await rpc(tenantA, v1)).toMatchObject({
        status: 200,
        body: { id: 'y', result: { task: { status: { state: 'TASK_STATE_COMPLETED' } } } },
      });
      // The stock v1.0 client with its A2A-Version header dropped, as the A2A TCK's client sends.
      const unversioned = ((input: string | URL | Request, init?: RequestInit) => {
        const headers = new Headers(init?.headers);
        headers.delete('a2a-version');
        return fetchAs(tenantA)(input, { ...init, headers: Object.fromEntries(headers.entries()) });
      }) as typeof fetch;
      const client = await new ClientFactory({
        transports: [new JsonRpcTransportFactory({ fetchImpl: unversioned })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl: unversioned }),
      }).createFromUrl(cardUrl(), '');
      expect(client.protocolVersion).toBe('1.0');
      const task = asTask(await client.sendMessage(send('echo:stock-unversioned')));
      expect(artifactText(task)).toEqual(['stock-unversioned']);
      expect((await client.getTask({ tenant: '', id: task.id, historyLength: undefined })).id).toBe(task.id);
      const parked = asTask(await client.sendMessage(send('park')));
      expect((await client.cancelTask({ tenant: '', id: parked.id, metadata: undefined })).status?.state).toBe(
        TaskState.TASK_STATE_CANCELED,
      );
    });
  });

  describe("HTTP+JSON v0.3 (the card's v0.3 HTTP+JSON interface, `{base}/v1/...`)", () => {
    /** A stock v0.3 client of the HTTP+JSON binding: the card's v0.3 interfaces, the SDK's compat REST transport. */
    const legacyRestClientOf = async (tenant: string): Promise<Client> => {
      const card = AgentCard.fromJSON(await (await fetchAs(tenant)(cardUrl())).json());
      card.supportedInterfaces = card.supportedInterfaces.filter(
        (i) => i.protocolVersion === '0.3' && i.protocolBinding === 'HTTP+JSON',
      );
      return new ClientFactory({
        transports: [new RestTransportFactory({ fetchImpl: fetchAs(tenant), legacyCompat: { enabled: true } })],
      }).createFromAgentCard(card);
    };

    it("sends, gets, streams and cancels through the stock client's v0.3 REST transport; unknown and ended tasks get their errors", async () => {
      const client = await legacyRestClientOf(tenantA);
      expect(client.protocolVersion).toBe('0.3');
      const task = asTask(await client.sendMessage(send('echo:legacy-rest')));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(artifactText(task)).toEqual(['legacy-rest']);
      expect((await client.getTask({ tenant: '', id: task.id, historyLength: undefined })).id).toBe(task.id);
      await expect(client.getTask({ tenant: '', id: randomUUID(), historyLength: undefined })).rejects.toBeInstanceOf(
        TaskNotFoundError,
      );
      await expect(client.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toBeInstanceOf(
        TaskNotCancelableError,
      );
      const parked = asTask(await client.sendMessage(send('park')));
      expect((await client.cancelTask({ tenant: '', id: parked.id, metadata: undefined })).status?.state).toBe(
        TaskState.TASK_STATE_CANCELED,
      );
      // Another tenant's task is as missing as one that never was.
      const other = await legacyRestClientOf(tenantB);
      await expect(other.getTask({ tenant: '', id: task.id, historyLength: undefined })).rejects.toBeInstanceOf(
        TaskNotFoundError,
      );
      const events: string[] = [];
      for await (const { payload } of client.sendMessageStream(send('echo:legacy-stream'))) {
        if (payload?.$case === 'task') events.push(`task:${payload.value.status?.state}`);
        else if (payload?.$case === 'statusUpdate') events.push(`status:${payload.value.status?.state}`);
        else if (payload?.$case === 'artifactUpdate')
          events.push(`artifact:${artifactText({ artifacts: [payload.value.artifact!] } as Task).join()}`);
      }
      expect(events[0]).toBe(`task:${TaskState.TASK_STATE_SUBMITTED}`);
      expect(events.slice(-2)).toEqual(['artifact:legacy-stream', `status:${TaskState.TASK_STATE_COMPLETED}`]);
    });

    it('keeps push notification configs through v0.3 routes', async () => {
      const client = await legacyRestClientOf(tenantA);
      const parked = asTask(await client.sendMessage(send('park')));
      const config = {
        tenant: '',
        taskId: parked.id,
        id: 'legacy-hook',
        url: 'http://127.0.0.1:9/hook',
        token: 't',
        authentication: undefined,
      };
      expect(await client.createTaskPushNotificationConfig(config)).toMatchObject({
        taskId: parked.id,
        id: 'legacy-hook',
        url: config.url,
      });
      expect(
        await client.getTaskPushNotificationConfig({ tenant: '', taskId: parked.id, id: 'legacy-hook' }),
      ).toMatchObject({ id: 'legacy-hook', url: config.url });
      expect(
        (
          await client.listTaskPushNotificationConfig({ tenant: '', taskId: parked.id, pageSize: 0, pageToken: '' })
        ).configs.map((c) => c.id),
      ).toEqual(['legacy-hook']);
      await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: parked.id, id: 'legacy-hook' });
      expect(
        (await client.listTaskPushNotificationConfig({ tenant: '', taskId: parked.id, pageSize: 0, pageToken: '' }))
          .configs,
      ).toEqual([]);
      await client.cancelTask({ tenant: '', id: parked.id, metadata: undefined });
    });

    it('answers a malformed body, an unknown route and a v1.0 request on a v0.3 path in the v0.3 error shape; a missing agent 404', async () => {
      const post = (path: string, body: string, headers: Record<string, string> = {}) =>
        fetch(`${instance.url}/a2a/agents/echo/rest/v1/${path}`, {
          method: 'POST',
          headers: { ...headersOf(tenantA), 'content-type': 'application/json', ...headers },
          body,
        });
      const malformed = await post('message:send', '{');
      expect(malformed.status).toBe(400);
      expect(await malformed.json()).toMatchObject({ code: -32700 });
      const unknown = await post('frobnicate', '{}');
      expect(unknown.status).toBe(404);
      expect(await unknown.json()).toMatchObject({ code: -32601 });
      const v1 = await post(
        'message:send',
        JSON.stringify({ message: { messageId: randomUUID(), role: 'ROLE_USER', content: [{ text: 'x' }] } }),
        { 'a2a-version': '1.0' },
      );
      expect(v1.status).toBe(404);
      const missing = await fetch(`${instance.url}/a2a/agents/nope/rest/v1/tasks/x`, { headers: headersOf(tenantA) });
      expect(missing.status).toBe(404);
      expect(await missing.json()).toMatchObject({ code: 'AGENT_NOT_FOUND' });
    });
  });

  describe('what the official clients and the TCK check', () => {
    const listTasks = (client: Client, params: { historyLength?: number; statusTimestampAfter?: string }) =>
      client.listTasks({
        tenant: '',
        contextId: '',
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: 10,
        pageToken: '',
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: false,
        ...params,
      });

    it('refuses ListTasks with a negative historyLength or a statusTimestampAfter that is no timestamp', async () => {
      const client = await clientOf(tenantA);
      await expect(listTasks(client, { historyLength: -1 })).rejects.toThrow(/historyLength/);
      await expect(listTasks(client, { statusTimestampAfter: '-1' })).rejects.toThrow(/statusTimestampAfter/);
      expect(
        Array.isArray(
          (await listTasks(client, { historyLength: 0, statusTimestampAfter: '2026-01-01T00:00:00Z' })).tasks,
        ),
      ).toBe(true);
    });

    it("refuses SendMessage without the sender's role, and takes no task", async () => {
      const before = await taskCountOf(instance.deps.db, tenantB);
      const roleless = SendMessageRequest.fromJSON({
        message: { messageId: randomUUID(), parts: [{ text: 'echo:no role' }] },
      });
      await expect((await clientOf(tenantB)).sendMessage(roleless)).rejects.toThrow(/role/);
      expect(await taskCountOf(instance.deps.db, tenantB)).toBe(before);
    });

    it("serves the mesh's own card at the host root: the tenant's agents as skills, each card URL one a stock client sends through", async () => {
      const resolver = new DefaultAgentCardResolver({ fetchImpl: fetchAs(tenantB) });
      const root = await resolver.resolve(instance.url!);
      const listed = ((await call(tenantB, 'GET', '/a2a/agents')).body!.agents as { name: string }[]).map(
        (a) => a.name,
      );
      expect(root.skills.map((s) => s.id).sort()).toEqual(listed.sort());
      expect(listed).toContain('echo');
      const catalog = root.capabilities!.extensions.find((e) => e.uri === AGENT_CATALOG_EXTENSION)!.params as {
        agents: { name: string; cardUrl: string }[];
      };
      const echo = catalog.agents.find((a) => a.name === 'echo')!;
      expect(echo.cardUrl).toBe(cardUrl('echo'));
      expect(root.skills.find((s) => s.id === 'echo')!.description).toContain(echo.cardUrl);
      const client = await new ClientFactory({
        transports: [new JsonRpcTransportFactory({ fetchImpl: fetchAs(tenantB) })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetchAs(tenantB) }),
      }).createFromUrl(echo.cardUrl, '');
      const task = asTask(await client.sendMessage(send('echo:found at the root')));
      expect(artifactText(task)).toEqual(['found at the root']);
      // Another tenant's catalog names its own agents only.
      const other = await new DefaultAgentCardResolver({ fetchImpl: fetchAs(`nobody-${suffix}`) }).resolve(
        instance.url!,
      );
      expect([other.skills, other.supportedInterfaces.map((i) => i.url)]).toEqual([[], [`${instance.url}/a2a/rpc`]]);
    });

    it("routes a message sent to the mesh's own card to the agent its metadata's skillId names; the task is read there", async () => {
      expect((await call(tenantC, 'PUT', '/a2a/agents/twin', agent.card())).status).toBe(201);
      const mesh = await new ClientFactory({
        transports: [new JsonRpcTransportFactory({ fetchImpl: fetchAs(tenantC) })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetchAs(tenantC) }),
      }).createFromUrl(instance.url!);
      const toSkill = (skillId: string, text: string) =>
        SendMessageRequest.fromJSON({
          message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], metadata: { skillId } },
        });
      const viaTwin = asTask(await mesh.sendMessage(toSkill('twin', 'echo:to the twin')));
      const viaEcho = asTask(await mesh.sendMessage(toSkill('echo', 'echo:to echo')));
      expect([artifactText(viaTwin), artifactText(viaEcho)]).toEqual([['to the twin'], ['to echo']]);
      const agentOf = async (id: string) =>
        ((await instance.deps.db.query('SELECT agent FROM a2a_tasks WHERE id = $1', [id])) as { agent: string }[])[0]
          .agent;
      expect([await agentOf(viaTwin.id), await agentOf(viaEcho.id)]).toEqual(['twin', 'echo']);
      // A skill id of one agent's own card (not an agent's name) routes to that agent.
      const shouting = { ...agent.card(), skills: [{ id: 'shout', name: 'Shout', description: 'shouts', tags: [] }] };
      expect((await call(tenantC, 'PUT', '/a2a/agents/loud', shouting)).status).toBe(201);
      const viaShout = asTask(await mesh.sendMessage(toSkill('shout', 'echo:to the skill')));
      expect([await agentOf(viaShout.id), artifactText(viaShout)]).toEqual(['loud', ['to the skill']]);
      expect((await mesh.getTask({ tenant: '', id: viaTwin.id, historyLength: undefined })).id).toBe(viaTwin.id);
      await expect(mesh.getTask({ tenant: '', id: randomUUID(), historyLength: undefined })).rejects.toBeInstanceOf(
        TaskNotFoundError,
      );
      const before = await taskCountOf(instance.deps.db, tenantC);
      await expect(mesh.sendMessage(send('echo:no skill'))).rejects.toThrow(/skillId/);
      await expect(mesh.sendMessage(toSkill('nobody', 'echo:x'))).rejects.toThrow(/skill nobody/);
      expect(await taskCountOf(instance.deps.db, tenantC)).toBe(before);
    });

    it('serves a card registered with "skills": [] with the field', async () => {
      expect((await call(tenantC, 'PUT', '/a2a/agents/skillless', { ...agent.card(), skills: [] })).status).toBe(201);
      const served = (await (await fetchAs(tenantC)(cardUrl('skillless'))).json()) as Record<string, unknown>;
      expect(served.skills).toEqual([]);
    });
  });

  describe('JSON-RPC errors', () => {
    const getTask = (id: string) => JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'GetTask', params: { id } });
    it.each([
      ['malformed JSON', '{"jsonrpc": "2.0", "method": ', '1.0', -32700],
      ['a batch', '[]', '1.0', -32600],
      [
        'a wrong jsonrpc version',
        JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'GetTask', params: {} }),
        '1.0',
        -32600,
      ],
      ['no method', JSON.stringify({ jsonrpc: '2.0', id: 1 }), '1.0', -32600],
      ['an unknown method', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'Frobnicate', params: {} }), '1.0', -32601],
      [
        'params that are not an object',
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: [1] }),
        '1.0',
        -32602,
      ],
      ['an unknown task', getTask(randomUUID()), '1.0', -32001],
      ['an unsupported version', getTask(randomUUID()), '2.0', -32009],
      [
        'a stream continuing an unknown task',
        JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'SendStreamingMessage',
          params: { message: { messageId: 'm', taskId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'x' }] } },
        }),
        '1.0',
        -32001,
      ],
      [
        'push configs of an unknown task',
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ListTaskPushNotificationConfigs', params: { taskId: 't' } }),
        '1.0',
        -32001,
      ],
      [
        'a v0.3 unknown task',
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: randomUUID() } }),
        undefined,
        -32001,
      ],
      ['a v0.3 malformed body', '{', undefined, -32700],
      [
        'a tenant parameter naming another tenant',
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ListTasks', params: { tenant: 'someone-else' } }),
        '1.0',
        -32602,
      ],
      [
        'a page size over 100',
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ListTasks', params: { pageSize: 101 } }),
        '1.0',
        -32602,
      ],
      [
        'a page token the mesh did not issue',
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ListTasks', params: { pageToken: 'bogus' } }),
        '1.0',
        -32602,
      ],
      [
        'continuing an unknown task',
        JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'SendMessage',
          params: { message: { messageId: 'm', taskId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'x' }] } },
        }),
        '1.0',
        -32001,
      ],
    ])('answers %s with its code, HTTP 200', async (_, body, version, code) => {
      const answer = await rpc(tenantA, body, version);
      expect(answer.status).toBe(200);
      expect(answer.body.error?.code).toBe(code);
      expect(typeof answer.body.error?.message).toBe('string');
    });

    it('refuses a part of a media type the agent takes none of with -32005 (REST 400), in v1.0 and v0.3, storing nothing', async () => {
      const tasksOf = () => taskCountOf(instance.deps.db, tenantA);
      const before = await tasksOf();
      const png = () => ({
        messageId: randomUUID(),
        role: 'ROLE_USER',
        parts: [{ text: 'echo:look' }, { url: 'http://127.0.0.1:9/a.png', mediaType: 'image/png' }],
      });
      const raw = await rpc(
        tenantA,
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: png() } }),
        '1.0',
      );
      expect(raw).toMatchObject({
        status: 200,
        body: {
          error: {
            code: -32005,
            message: "message.parts.1: media type image/png is not among the agent's input modes (text/plain)",
          },
        },
      });
      for (const client of [await clientOf(tenantA), await restClientOf(tenantA)]) {
        await expect(client.sendMessage(SendMessageRequest.fromJSON({ message: png() }))).rejects.toBeInstanceOf(
          ContentTypeNotSupportedError,
        );
      }
      const v03 = {
        kind: 'message',
        messageId: randomUUID(),
        role: 'user',
        parts: [{ kind: 'file', file: { uri: 'http://127.0.0.1:9/a.png', mimeType: 'image/png' } }],
      };
      expect(
        (
          await rpc(
            tenantA,
            JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: v03 } }),
          )
        ).body.error?.code,
      ).toBe(-32005);
      const rest = await fetch(`${instance.url}/a2a/agents/echo/rest/message:send`, {
        method: 'POST',
        headers: { ...headersOf(tenantA), 'content-type': 'application/json', 'a2a-version': '1.0' },
        body: JSON.stringify({ message: png() }),
      });
      expect(rest.status).toBe(400);
      expect(await tasksOf()).toBe(before);
      // A text part, which the card takes, still goes through.
      expect(asTask(await (await clientOf(tenantA)).sendMessage(send('echo:plain'))).status?.state).toBe(
        TaskState.TASK_STATE_COMPLETED,
      );
    });

    it('answers an agent the tenant has not registered with 404 AGENT_NOT_FOUND', async () => {
      const response = await fetch(`${instance.url}/a2a/agents/nobody/rpc`, {
        method: 'POST',
        headers: { ...headersOf(tenantA), 'content-type': 'application/json' },
        body: getTask('x'),
      });
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ code: 'AGENT_NOT_FOUND' });
    });
  });
});
