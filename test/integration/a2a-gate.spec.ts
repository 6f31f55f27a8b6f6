import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Message, SendMessageRequest, Task, TaskState } from '@a2a-js/sdk';
import {
  Client,
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { DevSigningKey, ensureDevSigningKey, mintDevToken, parseMintArgs } from '@libs/security/dev-token';
import { endTaskWorkflows, taskCountOf } from '../support/a2a-tasks';
import { EchoAgent, textOf } from '../support/a2a-echo-agent';
import { testConfig, tokenGateEnv, uniqueTopic } from '../support/env';

/**
 * The A2A routes behind the real token gate (JWT from a keys file, API keys), enforcing and fail-closed, as a
 * deployment runs them: no test stand-in decides the tenant. The stock client is handed the caller's credentials
 * the way a real one is (its fetch adds the header), and is built from the card URL alone.
 */
describe('A2A through the token gate (real gateway and worker, stock @a2a-js/sdk client)', () => {
  const suffix = randomUUID().slice(0, 8);
  const [ACME, BETA] = [`acme-${suffix}`, `beta-${suffix}`];
  let dir: string;
  let signing: DevSigningKey;
  let instance: RunningInstance;
  const agent = new EchoAgent();
  const jwt = (tenant: string, scopes: string) =>
    mintDevToken(signing, parseMintArgs(['--tenant', tenant, '--scopes', scopes, '--sub', `${tenant}-caller`]));

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'a2a-gate-spec-'));
    signing = await ensureDevSigningKey(dir);
    await agent.start();
    instance = await startInstance(
      testConfig({
        EVENTMESH_INSTANCE_ID: `a2a-gate-${suffix}`,
        EVENTMESH_KAFKA_TOPICS: uniqueTopic('a2agate'),
        EVENTMESH_HTTP_PORT: '0',
        EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
        ...tokenGateEnv(signing.jwksPath),
        EVENTMESH_AGENTS_CALL_TIMEOUT_MS: '5000',
      }),
      { roles: ['gateway', 'worker'] },
    );
  });
  afterAll(async () => {
    try {
      await endTaskWorkflows([ACME, BETA]);
    } finally {
      await instance?.close();
      await agent.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const request = (method: string, path: string, headers: Record<string, string>, body?: unknown) =>
    fetch(`${instance.url}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const cardUrl = `/a2a/agents/echo/.well-known/agent-card.json`;
  /** The stock client's fetch, adding the caller's credentials to each request (none: a client without them). */
  const fetchWith = (headers: Record<string, string>): typeof fetch =>
    ((input: string | URL | Request, init?: RequestInit) =>
      fetch(input, {
        ...init,
        headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), ...headers },
      })) as typeof fetch;
  const clientWith = (headers: Record<string, string>, binding: 'jsonrpc' | 'rest' = 'jsonrpc'): Promise<Client> => {
    const fetchImpl = fetchWith(headers);
    const transport =
      binding === 'jsonrpc' ? new JsonRpcTransportFactory({ fetchImpl }) : new RestTransportFactory({ fetchImpl });
    return new ClientFactory({
      transports: [transport],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }).createFromUrl(`${instance.url}${cardUrl}`, '');
  };
  const send = (text: string): SendMessageRequest =>
    SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });
  const rpcSend = (headers: Record<string, string>) =>
    request(
      'POST',
      '/a2a/agents/echo/rpc',
      { ...headers, 'a2a-version': '1.0' },
      { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: SendMessageRequest.toJSON(send('echo:unseen')) },
    );
  const tasksOf = (tenant: string) => taskCountOf(instance.deps.db, tenant);
  const asTask = (answer: Message | Task): Task => {
    expect('status' in answer).toBe(true);
    return answer as Task;
  };

  it('registers an agent with a subscribe token; refuses a registration without credentials (401) or with publish only (403)', async () => {
    expect((await request('PUT', '/a2a/agents/echo', {}, agent.card())).status).toBe(401);
    const publishOnly = await request('PUT', '/a2a/agents/echo', bearer(await jwt(ACME, 'publish')), agent.card());
    expect(publishOnly.status).toBe(403);
    expect(publishOnly.headers.get('www-authenticate')).toBe('Bearer error="insufficient_scope", scope="subscribe"');
    expect((await request('GET', '/a2a/agents/echo', bearer(await jwt(ACME, 'publish')))).status).toBe(404);
    expect((await request('PUT', '/a2a/agents/echo', bearer(await jwt(ACME, 'subscribe')), agent.card())).status).toBe(
      201,
    );
    expect((await request('PUT', '/a2a/agents/echo', bearer(await jwt(BETA, 'subscribe')), agent.card())).status).toBe(
      201,
    );
  });

  it('refuses the card, a send and a stream without credentials: 401 with a Bearer challenge, nothing stored', async () => {
    const before = await tasksOf(ACME);
    for (const response of [
      await request('GET', cardUrl, {}),
      await rpcSend({}),
      await rpcSend(bearer('not-a-token')),
      await request(
        'POST',
        '/a2a/agents/echo/rest/message:stream',
        { 'a2a-version': '1.0' },
        SendMessageRequest.toJSON(send('echo:unseen')),
      ),
    ]) {
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(await response.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    }
    await expect(clientWith({})).rejects.toThrow(/401/);
    expect(await tasksOf(ACME)).toBe(before);
    expect(agent.received).not.toContain('echo:unseen');
    expect(
      Number(
        (
          await instance.deps.db.query(
            `SELECT count(*)::int AS n FROM a2a_tasks WHERE history::text LIKE '%echo:unseen%'`,
          )
        )[0].n,
      ),
    ).toBe(0);
  });

  it("serves the card with the gate's schemes; the stock client sends with a JWT (JSON-RPC) and with an API key (REST)", async () => {
    const token = await jwt(ACME, 'publish');
    const card = (await (await request('GET', cardUrl, bearer(token))).json()) as Record<string, unknown>;
    expect(card).toMatchObject({
      securitySchemes: {
        bearer: { httpAuthSecurityScheme: { scheme: 'Bearer' } },
        apiKey: { apiKeySecurityScheme: { name: 'x-api-key' } },
      },
    });

    const task = asTask(await (await clientWith(bearer(token))).sendMessage(send('echo:through the gate')));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.artifacts.map((a) => textOf({ parts: a.parts } as Message))).toEqual(['through the gate']);
    const [row] = (await instance.deps.db.query(`SELECT tenant, agent FROM a2a_tasks WHERE id = $1`, [task.id])) as {
      tenant: string;
      agent: string;
    }[];
    expect(row).toEqual({ tenant: ACME, agent: 'echo' });

    const created = await request('POST', '/admin/api-keys', bearer(await jwt(ACME, 'admin,publish')), {
      name: 'agent-caller',
      scopes: ['publish'],
    });
    expect(created.status).toBe(201);
    const { key } = (await created.json()) as { key: string };
    const viaKey = asTask(await (await clientWith({ 'x-api-key': key }, 'rest')).sendMessage(send('echo:with a key')));
    expect(viaKey.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(
      (
        await (
          await clientWith({ 'x-api-key': key }, 'rest')
        ).getTask({ tenant: '', id: task.id, historyLength: undefined })
      ).id,
    ).toBe(task.id);
  });

  it('refuses a send with a subscribe-only token (403, nothing stored)', async () => {
    const before = await tasksOf(ACME);
    const response = await rpcSend(bearer(await jwt(ACME, 'subscribe')));
    expect(response.status).toBe(403);
    expect(response.headers.get('www-authenticate')).toBe('Bearer error="insufficient_scope", scope="publish"');
    expect(await tasksOf(ACME)).toBe(before);
    expect(agent.received).not.toContain('echo:unseen');
  });

  it("shows each tenant only its own tasks, by the token's tenant: another's is not found, not listed, not cancelable", async () => {
    const acme = await clientWith(bearer(await jwt(ACME, 'publish')));
    const beta = await clientWith(bearer(await jwt(BETA, 'publish')));
    const task = asTask(await acme.sendMessage(send('echo:acme only')));
    await expect(beta.getTask({ tenant: '', id: task.id, historyLength: undefined })).rejects.toBeInstanceOf(
      TaskNotFoundError,
    );
    await expect(beta.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toBeInstanceOf(
      TaskNotFoundError,
    );
    const listTasks = (client: Client) =>
      client.listTasks({
        tenant: '',
        contextId: '',
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: 100,
        pageToken: '',
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: false,
      });
    const betaIds = (await listTasks(beta)).tasks.map((t) => t.id);
    expect(betaIds).not.toContain(task.id);
    expect((await listTasks(acme)).tasks.map((t) => t.id)).toContain(task.id);
    // A tenant parameter cannot widen the token's tenant.
    const widened = await request(
      'POST',
      '/a2a/agents/echo/rpc',
      { ...bearer(await jwt(BETA, 'publish')), 'a2a-version': '1.0' },
      { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: { tenant: ACME } },
    );
    expect(((await widened.json()) as { error?: { code: number } }).error?.code).toBe(-32602);
  });
});
