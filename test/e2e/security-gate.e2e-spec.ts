import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { exportJWK, generateKeyPair, JWK, KeyLike, SignJWT } from 'jose';
import { Kafka } from 'kafkajs';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { testConfig, uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { topicEndOffset } from '../support/topic-offsets';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

const ISSUER = 'https://issuer.e2e.test';
const AUDIENCE = 'eventmesh-e2e';

/**
 * The gate as an operator rolls it out, on real instance processes and the real servers: report-only first
 * (a bad token is let through, and audited as a CloudEvent a subscriber of the audit topic receives), then
 * fail-closed (a bad token is refused 401 and the topic's end offsets do not move), and an open gate said plainly.
 * Tokens are ES256 JWTs signed by a key the test made, trusted through a keys file.
 */
describe('security gate, end to end', () => {
  const config = testConfig();
  const topic = uniqueTopic('gate');
  const auditTopic = uniqueTopic('audit');
  const receiver = new WebhookReceiver();
  const ids: string[] = [];
  const instances: InstanceProcess[] = [];
  let temporal: { client: Client; close(): Promise<void> };
  let kafka: Kafka;
  let privateKey: KeyLike;
  let keysFile: string;

  beforeAll(async () => {
    const pair = await generateKeyPair('ES256');
    privateKey = pair.privateKey;
    const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: 'e2e-1', alg: 'ES256', use: 'sig' };
    keysFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'eventmesh-gate-')), 'jwks.json');
    writeFileSync(keysFile, JSON.stringify({ keys: [jwk] }));
    await receiver.start();
    temporal = await temporalClient();
    kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'gate-e2e-check', logLevel: 0 });
  });

  afterAll(async () => {
    for (const instance of instances) await instance.stop();
    await terminateWorkflows(temporal.client, ids.map(dispatchWorkflowIdOf));
    await temporal?.close();
    await receiver.stop();
  });

  function token(claims: Record<string, unknown>, expiresIn: string | number = '10m'): Promise<string> {
    return new SignJWT({ tenant: 'acme', scope: 'publish subscribe admin', ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: 'e2e-1', typ: 'at+jwt' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setSubject('alice')
      .setIssuedAt()
      .setExpirationTime(expiresIn)
      .sign(privateKey);
  }

  async function start(env: Record<string, string>): Promise<string> {
    const id = `gate-${randomUUID().slice(0, 8)}`;
    ids.push(id);
    const instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: id,
      EVENTMESH_KAFKA_TOPICS: `${topic},${auditTopic}`,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '2',
      EVENTMESH_DELIVERY_LEASE_TTL_MS: '6000',
      EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: keysFile,
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: ISSUER,
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: AUDIENCE,
      ...env,
    });
    instances.push(instance);
    return instance.ready();
  }

  const endOffsets = () => topicEndOffset(kafka, topic);

  const event = () =>
    JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/gate-e2e', type: 'gate.checked' });
  const publish = (api: string, authorization?: string) =>
    fetch(`${api}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json', ...(authorization ? { authorization } : {}) },
      body: event(),
    });

  it('open: no filter configured admits all, and /health says gate: open', async () => {
    const api = await start({});
    const health = (await (await fetch(`${api}/health`)).json()) as { gate: unknown };
    expect(health.gate).toEqual({ ingress: 'open', admin: 'open' });
    expect((await publish(api)).status).toBe(202);
  });

  it('report-only: a bad token is let through and audited as a CloudEvent a subscriber of the audit topic receives', async () => {
    const api = await start({
      EVENTMESH_SECURITY_GATE_FILTERS: 'token',
      EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'false',
      EVENTMESH_SECURITY_GATE_AUDIT_SINK: 'CLOUDEVENTS',
      EVENTMESH_SECURITY_GATE_AUDIT_TOPIC: auditTopic,
    });
    const health = (await (await fetch(`${api}/health`)).json()) as { gate: unknown };
    expect(health.gate).toEqual({ ingress: 'report-only', admin: 'open' });
    // The audit topic is reserved: the operator's tenant (`default` here) is delivered every record of it (another
    // tenant, its own only), so the expired token's record, of tenant default, reaches it. Its sink answers
    // the validation handshake all the same (config.trusted not asked).
    const operator = `Bearer ${await token({ tenant: 'default' })}`;
    const subscribed = await fetch(`${api}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: operator },
      body: JSON.stringify({ sink: receiver.url, topic: auditTopic }),
    });
    expect(subscribed.status).toBe(201);

    const expired = `Bearer ${await token({}, Math.floor(Date.now() / 1000) - 3600)}`;
    const requestId = `expired-${randomUUID()}`;
    const response = await fetch(`${api}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json', authorization: expired, 'x-request-id': requestId },
      body: event(),
    });
    expect(response.status).toBe(202);

    const delivered = await waitFor(
      'the audit event of the expired token at the audit topic subscriber',
      () =>
        receiver.requests.find(
          (r) => r.body.length > 0 && (JSON.parse(r.body.toString()) as { requestId?: string }).requestId === requestId,
        ),
      { timeoutMs: 30000 },
    );
    expect(delivered.headers['ce-type']).toBe('io.eventmesh.audit.decision.v1');
    const record = JSON.parse(delivered.body.toString()) as Record<string, unknown>;
    expect(record).toMatchObject({
      gate: 'ingress',
      route: 'POST /events/publish',
      action: 'publish',
      topic,
      decision: 'deny',
      enforced: false,
      filter: 'token',
      reason: 'expired',
      principal: 'anonymous',
    });
    // Never a token, a body or a secret.
    expect(delivered.body.toString()).not.toContain(expired.slice(7, 40));
  });

  it('fail-closed: a bad token is refused 401 with WWW-Authenticate and the topic does not move; a good one is accepted', async () => {
    const api = await start({
      EVENTMESH_SECURITY_GATE_FILTERS: 'token',
      EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
      EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
    });
    const before = await endOffsets();
    const expired = await publish(api, `Bearer ${await token({}, Math.floor(Date.now() / 1000) - 3600)}`);
    expect(expired.status).toBe(401);
    expect(expired.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token"/);
    expect(await expired.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    const none = await publish(api);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expect(await endOffsets()).toBe(before);

    const accepted = await publish(api, `Bearer ${await token({})}`);
    expect(accepted.status).toBe(202);
    expect(await endOffsets()).toBe(before + 1);
  });
});
