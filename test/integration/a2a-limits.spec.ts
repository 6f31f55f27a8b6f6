import { randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { DataSource } from 'typeorm';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { eventsTopicOf, requestTopicOf } from '@libs/a2a';
import type { EventProducer } from '@libs/kafka';
import { buildGates, PublisherSecretStore, SecretBox } from '@libs/security';
import { createDataSource, TenantQuotaStore } from '@libs/storage';
import { GATES_ENFORCING_TOKEN, NO_QUOTA as NONE, testConfig } from '../support/env';
import { HeaderToken } from '../support/header-tenant-gate';
import { kafkaTopicNames, storedEvents } from '../support/topic-offsets';

const BURST_BYTES = 400;
const card = (name: string, pad = '') => ({
  name,
  description: `an agent of the limits spec${pad}`,
  version: '1.0.0',
  supportedInterfaces: [{ url: 'http://127.0.0.1:1/rpc', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
  capabilities: { streaming: false, pushNotifications: false },
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'echo', name: 'Echo', description: 'echoes text', tags: ['test'] }],
});

/**
 * A2A registrations and sends under the same rules as publishes, and the tenant's cap on agents, on a real gateway
 * (real Postgres, Kafka and Temporal; the gate enforcing TokenAuth, SignatureVerifier and TenantQuota): a
 * registration or a send larger than the tenant's byte burst is 413 BATCH_EXCEEDS_BURST (a read is not charged),
 * a publisher that signs must sign its registration and its sends (refused unsigned or badly signed), and one agent past EVENTMESH_AGENTS_MAX_PER_TENANT is 409
 * AGENT_LIMIT_REACHED (its topics not made); nothing refused is stored. Removing an agent removes its topics'
 * events, and its topics are not served until it is registered again.
 */
describe('A2A limits per tenant (real gateway, the gate enforcing)', () => {
  const run = randomUUID().slice(0, 6);
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `a2a-limits-${run}`,
    EVENTMESH_KAFKA_TOPICS: `a2a-limits-${run}`,
    ...GATES_ENFORCING_TOKEN,
    EVENTMESH_SECURITY_GATE_FILTERS: 'token,signature,quota',
    EVENTMESH_AGENTS_MAX_PER_TENANT: '2',
  });
  const tenants = {
    bytes: `bytes-${run}`,
    capped: `capped-${run}`,
    signer: `signer-${run}`,
    removed: `removed-${run}`,
  };
  const as = (tenant: string, principal = 'p') => ({
    'x-test-principal': principal,
    'x-test-tenant': tenant,
    'content-type': 'application/json',
  });
  let db: DataSource;
  let instance: RunningInstance;
  let url: string;
  let signingSecret: string;

  beforeAll(async () => {
    db = createDataSource(config.postgres, `a2a-limits-${run}`);
    await db.initialize();
    // 400 bytes of burst (and of rate): a body larger than that can never pass.
    await new TenantQuotaStore(db).put(tenants.bytes, { ...NONE, bytesPerSecond: BURST_BYTES, burstSeconds: 1 });
    ({ secret: signingSecret } = await new PublisherSecretStore(db, SecretBox.fromConfig(config)).create(
      tenants.signer,
      'signing-publisher',
    ));
    const gates = buildGates(config, {
      db,
      producer: {} as EventProducer,
      instanceId: config.instance.id,
      filters: { token: new HeaderToken() },
    });
    instance = await startInstance(config, { roles: ['gateway'], gates });
    url = instance.url!;
  });
  afterAll(async () => {
    await instance?.close();
    await db?.destroy();
  });

  const register = (tenant: string, name: string, body: unknown, principal?: string) =>
    fetch(`${url}/a2a/agents/${name}`, { method: 'PUT', headers: as(tenant, principal), body: JSON.stringify(body) });
  const rpc = (tenant: string, name: string, method: string, params: unknown) =>
    fetch(`${url}/a2a/agents/${name}/rpc`, {
      method: 'POST',
      headers: { ...as(tenant), 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });

  it('charges a registration and a send as publishes (413 past the byte burst), and not a read', async () => {
    const tenant = tenants.bytes;
    const large = await register(tenant, 'large', card('large', ' '.repeat(BURST_BYTES)));
    expect(large.status).toBe(413);
    expect(await large.json()).toMatchObject({
      code: 'BATCH_EXCEEDS_BURST',
      quota: 'bytes_per_second',
      maxBatchBytes: BURST_BYTES,
    });
    expect((await fetch(`${url}/a2a/agents/large`, { headers: as(tenant) })).status).toBe(404);
    // A registration within the burst passes (the quota of bytes only limits bytes).
    const small = {
      name: 's',
      description: 'd',
      version: '1',
      supportedInterfaces: [{ url: 'http://127.0.0.1:1/r', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      capabilities: {},
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: [],
    };
    expect(JSON.stringify(small).length).toBeLessThan(BURST_BYTES);
    expect((await register(tenant, 'small', small)).status).toBe(201);
    const text = 'x'.repeat(BURST_BYTES);
    const send = await rpc(tenant, 'small', 'SendMessage', {
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
    });
    expect(send.status).toBe(413);
    expect(await send.json()).toMatchObject({ code: 'BATCH_EXCEEDS_BURST' });
    // A read of the same size is not a publish: the agent's endpoint answers it (no such task).
    const read = await rpc(tenant, 'small', 'GetTask', { id: randomUUID(), padding: text });
    expect(read.status).toBe(200);
  });

  it('refuses an unsigned registration of a publisher that signs its publishes, storing nothing', async () => {
    const unsigned = await register(tenants.signer, 'signed', card('signed'), 'signing-publisher');
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect((await fetch(`${url}/a2a/agents/signed`, { headers: as(tenants.signer) })).status).toBe(404);
  });

  it('refuses an unsigned or badly signed send of a publisher that signs its publishes, writing no request', async () => {
    expect((await register(tenants.signer, 'target', card('target'))).status).toBe(201);
    const requests = requestTopicOf(tenants.signer, 'target');
    const body = (text: string) =>
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'SendMessage',
        params: {
          message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
          configuration: { returnImmediately: true },
        },
      });
    const send = (payload: string, signature: Record<string, string>) =>
      fetch(`${url}/a2a/agents/target/rpc`, {
        method: 'POST',
        headers: { ...as(tenants.signer, 'signing-publisher'), 'a2a-version': '1.0', ...signature },
        body: payload,
      });
    const headers = (secret: string, payload: string) => {
      const id = randomUUID();
      const at = new Date();
      return {
        'webhook-id': id,
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': new Webhook(secret).sign(id, at, payload),
      };
    };
    const unsigned = await send(body('unsigned'), {});
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toMatchObject({
      code: 'UNAUTHENTICATED',
      message: expect.stringContaining('webhook-signature are required'),
    });
    const payload = body('badly signed');
    const forged = await send(payload, headers(`whsec_${randomBytes(32).toString('base64')}`, payload));
    expect(forged.status).toBe(401);
    expect(await forged.json()).toMatchObject({
      code: 'UNAUTHENTICATED',
      message: expect.stringContaining('matches no secret'),
    });
    // Signed with the body changed after: the signature is of another body.
    const tampered = await send(body('tampered'), headers(signingSecret, payload));
    expect(await tampered.json()).toMatchObject({
      code: 'UNAUTHENTICATED',
      message: expect.stringContaining('matches no secret'),
    });
    expect(await storedEvents(instance.deps.topics, requests)).toBe(0);
    // Signed as the publisher signs, the same send is taken: its request is written.
    const signed = await send(payload, headers(signingSecret, payload));
    expect(signed.status).toBe(200);
    expect(await signed.json()).toMatchObject({ result: { task: { id: expect.any(String) } } });
    expect(await storedEvents(instance.deps.topics, requests)).toBe(1);
  });

  it("refuses an agent past the tenant's cap 409 AGENT_LIMIT_REACHED, and still replaces a registered one", async () => {
    const tenant = tenants.capped;
    expect((await register(tenant, 'one', card('one'))).status).toBe(201);
    expect((await register(tenant, 'two', card('two'))).status).toBe(201);
    const third = await register(tenant, 'three', card('three'));
    expect(third.status).toBe(409);
    expect(await third.json()).toMatchObject({ code: 'AGENT_LIMIT_REACHED', maxAgentsPerTenant: 2 });
    // Refused before its topics were made.
    const kafkaTopics = await kafkaTopicNames(instance.deps.kafka);
    expect(kafkaTopics).toContain(requestTopicOf(tenant, 'two'));
    expect(kafkaTopics).not.toContain(requestTopicOf(tenant, 'three'));
    expect(kafkaTopics).not.toContain(eventsTopicOf(tenant, 'three'));
    expect((await register(tenant, 'two', card('two', ' again'))).status).toBe(200);
    const listed = (await (await fetch(`${url}/a2a/agents`, { headers: as(tenant) })).json()) as
      { name: string }[] | { agents: { name: string }[] };
    const names = (Array.isArray(listed) ? listed : listed.agents).map((a) => a.name);
    expect(names).toEqual(['one', 'two']);
    // Another tenant's agents are not counted.
    expect((await register(tenants.signer, 'three', card('three'))).status).toBe(201);
  });

  it("removes an agent's topics with it: their events deleted, subscribing to them 404 until it is registered again", async () => {
    const tenant = tenants.removed;
    const topics = [requestTopicOf(tenant, 'gone'), eventsTopicOf(tenant, 'gone')];
    const subscribe = (topic: string) =>
      fetch(`${url}/subscriptions`, {
        method: 'POST',
        headers: as(tenant),
        body: JSON.stringify({ protocol: 'STREAM', topic }),
      });
    expect((await register(tenant, 'gone', card('gone'))).status).toBe(201);
    for (const topic of topics) {
      expect((await subscribe(topic)).status).toBe(201);
      // What the mesh writes there: a task's request, a task's event.
      await instance.deps.producer.publish(topic, {
        id: randomUUID(),
        source: '/a2a-limits',
        type: 'test.a2a.topic',
        extensions: {},
      });
      expect(await storedEvents(instance.deps.topics, topic)).toBe(1);
    }

    const { 'content-type': _, ...noBody } = as(tenant);
    expect((await fetch(`${url}/a2a/agents/gone`, { method: 'DELETE', headers: noBody })).status).toBe(204);
    for (const topic of topics) {
      expect(await storedEvents(instance.deps.topics, topic)).toBe(0);
      const refused = await subscribe(topic);
      expect(refused.status).toBe(404);
      expect(await refused.json()).toMatchObject({ code: 'UNKNOWN_TOPIC' });
    }
    expect((await register(tenant, 'gone', card('gone'))).status).toBe(201);
    expect((await subscribe(topics[0])).status).toBe(201);
  });
});
