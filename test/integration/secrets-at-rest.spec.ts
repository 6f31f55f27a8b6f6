import { randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import { ANONYMOUS, SecretBox, sealStoredSecrets, SinkGuard, SinkResolver } from '@libs/security';
import { SubscriptionService } from '@libs/subscriptions';
import { TopicNamespace } from '@libs/topics';
import { testConfig, uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/**
 * Webhook signing secrets at rest (real Postgres, Kafka, Temporal): the column holds a SecretBox value, never the
 * secret; deliveries are still signed so the official Standard Webhooks library verifies them; secrets stored in
 * the clear or under an old key are sealed with the active key at boot; the SSRF guard refuses a sink before the
 * validation handshake sends anything.
 */
describe('secrets at rest and webhook sinks (real servers)', () => {
  const topic = uniqueTopic('secrets');
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `secrets-${randomUUID().slice(0, 8)}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_HTTP_PORT: '0',
  });
  const receiver = new WebhookReceiver();
  let instance: RunningInstance;

  beforeAll(async () => {
    await receiver.start();
    instance = await startInstance(config);
  });
  afterAll(async () => {
    await instance?.close();
    await receiver.stop();
  });

  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${instance.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const storedSecretOf = async (id: string): Promise<string> =>
    (
      (await instance.deps.db.query('SELECT signing_secret FROM subscriptions WHERE id = $1', [id])) as {
        signing_secret: string;
      }[]
    )[0].signing_secret;

  it('stores the signing secret sealed, never in the clear, and still signs deliveries the official library verifies', async () => {
    const created = await post('/subscriptions', { sink: receiver.url, topic });
    expect(created.status).toBe(201);
    const secret = created.body.secret as string;
    expect(secret).toMatch(/^whsec_/);

    const stored = await storedSecretOf(created.body.id as string);
    expect(stored).toMatch(/^v1:test:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
    expect(stored).not.toContain(secret);
    expect(stored).not.toContain(secret.slice('whsec_'.length));
    expect(stored).not.toContain(Buffer.from(secret.slice('whsec_'.length), 'base64').toString('hex'));
    // Not a single row of the table holds a secret in the clear.
    const clear = (await instance.deps.db.query(
      `SELECT count(*)::int AS n FROM subscriptions WHERE signing_secret LIKE 'whsec_%'`,
    )) as { n: number }[];
    expect(clear[0].n).toBe(0);

    const eventId = randomUUID();
    const published = await fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({
        specversion: '1.0',
        id: eventId,
        source: '/secrets',
        type: 'secrets.checked',
        data: { n: 1 },
      }),
    });
    expect(published.status).toBe(202);
    const delivery = await waitFor(
      'the webhook to receive the event',
      () => receiver.requests.find((r) => r.headers['ce-id'] === eventId),
      { timeoutMs: 30000 },
    );
    const verified = new Webhook(secret).verify(delivery.body, {
      'webhook-id': String(delivery.headers['webhook-id']),
      'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
      'webhook-signature': String(delivery.headers['webhook-signature']),
    });
    expect(verified).toEqual({ n: 1 });
  });

  it('seals at boot what an earlier version stored in the clear, and re-seals values of an old key with the active one', async () => {
    const box = SecretBox.fromConfig(config);
    const plainId = randomUUID();
    const oldId = randomUUID();
    const plain = `whsec_${randomBytes(24).toString('base64')}`;
    const oldKey = { id: 'retired', key: randomBytes(32) };
    const oldSecret = `whsec_${randomBytes(24).toString('base64')}`;
    const sealedWithOld = new SecretBox([oldKey], 'retired').seal(oldSecret);
    await instance.deps.db.query(
      `INSERT INTO subscriptions (id, topic, protocol, sink, instance_id, status, signing_secret)
       VALUES ($1, $3, 'HTTP', 'http://127.0.0.1:9/hook', 'nobody', 'DISABLED', $4), ($2, $3, 'HTTP', 'http://127.0.0.1:9/hook', 'nobody', 'DISABLED', $5)`,
      [plainId, oldId, topic, plain, sealedWithOld],
    );
    // The runtime as it boots with the old key still configured after the active one (a rotation).
    const rotated = new SecretBox([...config.security.secrets.keys, oldKey], box.activeKey);
    const report = await sealStoredSecrets(instance.deps.db, rotated, { batch: 1 });
    expect(report).toMatchObject({ sealed: expect.any(Number), resealed: expect.any(Number), more: false });
    expect(report.sealed).toBeGreaterThanOrEqual(1);
    expect(report.resealed).toBeGreaterThanOrEqual(1);
    const nowPlain = await storedSecretOf(plainId);
    const nowOld = await storedSecretOf(oldId);
    expect(SecretBox.keyIdOf(nowPlain)).toBe('test');
    expect(SecretBox.keyIdOf(nowOld)).toBe('test');
    expect(box.open(nowPlain)).toBe(plain);
    expect(box.open(nowOld)).toBe(oldSecret);
    // A second pass has nothing left to do.
    expect(await sealStoredSecrets(instance.deps.db, rotated)).toEqual({
      sealed: 0,
      resealed: 0,
      unreadable: 0,
      more: false,
    });
  });

  it('seals a secret again with the active key when its subscription is written (PUT), after a key rotation', async () => {
    const created = await post('/subscriptions', { sink: receiver.url, topic, config: { trusted: true } });
    const id = created.body.id as string;
    const rotated = new SecretBox([{ id: 'next', key: randomBytes(32) }, ...config.security.secrets.keys], 'next');
    const service = new SubscriptionService(instance.deps.db, instance.deps.topics, {
      instanceId: config.instance.id,
      defaultTopic: topic,
      webhookOrigin: 'eventmesh',
      webhookTimeoutMs: 2000,
      secrets: rotated,
      sinks: SinkGuard.fromConfig(config),
      operatorTenant: config.admin.security.operatorTenant,
      namespace: TopicNamespace.fromConfig(instance.deps.db, instance.deps.topics, config),
    });
    try {
      expect(SecretBox.keyIdOf(await storedSecretOf(id))).toBe('test');
      await service.replace(id, { sink: receiver.url, config: { trusted: true } }, ANONYMOUS);
      const stored = await storedSecretOf(id);
      expect(SecretBox.keyIdOf(stored)).toBe('next');
      expect(rotated.open(stored)).toBe(created.body.secret);
    } finally {
      // This instance does not hold the key `next`: the subscription goes before it gets an event.
      await service.delete(id, 'default');
    }
  });

  it('refuses a sink in a refused range with 400 SINK_NOT_ALLOWED, field sink, and writes nothing', async () => {
    for (const sink of [
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:169.254.169.254]/',
      'http://metadata.google.internal/',
      'http://10.0.0.1/hook',
    ]) {
      const refused = await post('/subscriptions', { sink, topic });
      expect({ sink, status: refused.status, code: refused.body.code, field: refused.body.field }).toEqual({
        sink,
        status: 400,
        code: 'SINK_NOT_ALLOWED',
        field: 'sink',
      });
    }
    const rows = (await instance.deps.db.query(
      `SELECT count(*)::int AS n FROM subscriptions WHERE sink LIKE '%169.254%' OR sink LIKE '%10.0.0.1%' OR sink LIKE '%metadata%'`,
    )) as { n: number }[];
    expect(rows[0].n).toBe(0);
  });

  it.each([
    ['the metadata address', ['169.254.169.254']],
    ['a private address', ['10.0.0.1']],
    ['loopback as IPv4-mapped IPv6, loopback not allowed', ['::ffff:127.0.0.1']],
    ['loopback and then a private address', ['127.0.0.1', '10.0.0.1']],
  ])('refuses a name that resolves to %s before the handshake makes any connection', async (_, addresses) => {
    let resolutions = 0;
    const resolver: SinkResolver = async () => {
      resolutions++;
      return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    };
    const allowed = addresses[0] === '::ffff:127.0.0.1' ? [] : config.security.sinks.allowedRanges;
    const guard = new SinkGuard(allowed, resolver);
    const attempts: string[] = [];
    // Every connection the service could open (the handshake's) goes through this spy: it counts and connects nowhere.
    const spying = Object.assign(Object.create(guard) as SinkGuard, {
      agent: () =>
        guard.agent({}, (o, callback) => {
          attempts.push(o.hostname);
          callback(new Error('spy: no connection'), null);
        }),
    });
    const service = new SubscriptionService(instance.deps.db, instance.deps.topics, {
      instanceId: config.instance.id,
      defaultTopic: topic,
      webhookOrigin: 'eventmesh',
      webhookTimeoutMs: 2000,
      secrets: SecretBox.fromConfig(config),
      sinks: spying,
      operatorTenant: config.admin.security.operatorTenant,
      namespace: TopicNamespace.fromConfig(instance.deps.db, instance.deps.topics, config),
    });
    await expect(service.create({ sink: 'http://hooks.example.test/hook', topic }, ANONYMOUS)).rejects.toMatchObject({
      code: 'SINK_NOT_ALLOWED',
      details: { field: 'sink' },
    });
    expect(resolutions).toBe(1);
    expect(attempts).toEqual([]);
  });
});
