import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignatureReplayLedger } from '@libs/security';
import { DevSigningKey, ensureDevSigningKey, mintDevToken, parseMintArgs } from '@libs/security/dev-token';
import { testConfig, uniqueTopic } from '../support/env';

/**
 * The SignatureVerifier on two gateways sharing Postgres (EVENTMESH_SECURITY_GATE_FILTERS=signature, fail-closed):
 * publisher secrets registered through the admin API of one instance (behind its token gate, by an admin of tenant
 * `default`, the unauthenticated publishers' tenant), a signed publish accepted there, the same
 * `webhook-id` replayed on the other instance refused with 401 and nothing written to the topic.
 */
describe('signature gate across instances (real servers)', () => {
  const topic = uniqueTopic('signed');
  const suffix = randomUUID().slice(0, 8);
  const configOf = (name: string) =>
    testConfig({
      EVENTMESH_INSTANCE_ID: `${name}-${suffix}`,
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_HTTP_PORT: '0',
      EVENTMESH_SECURITY_GATE_FILTERS: 'signature',
      EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
      // An enforcing ingress gate boots only behind a gated admin API.
      EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
      EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
      EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: signing.jwksPath,
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: 'eventmesh-dev',
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: 'eventmesh',
    });
  let a: RunningInstance;
  let b: RunningInstance;
  let secret: string;
  let secretId: string;
  let dir: string;
  let signing: DevSigningKey;
  let adminHeaders: Record<string, string>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'signature-gate-spec-'));
    signing = await ensureDevSigningKey(dir);
    adminHeaders = {
      authorization: `Bearer ${await mintDevToken(signing, parseMintArgs(['--tenant', 'default', '--scopes', 'admin', '--sub', 'ops']))}`,
    };
    [a, b] = await Promise.all([
      startInstance(configOf('sig-a'), { roles: ['gateway'] }),
      startInstance(configOf('sig-b'), { roles: ['gateway'] }),
    ]);
  });
  afterAll(async () => {
    await a?.deps.db.query(`DELETE FROM publisher_secrets WHERE tenant = 'default' AND principal = 'anonymous'`);
    await Promise.all([a?.close(), b?.close()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Every event on the topic: the sum of its partitions' end offsets. */
  const endOffsets = async () => [...(await a.deps.topics.endOffsets(topic)).values()].reduce((sum, n) => sum + n, 0);
  const event = (n: number) =>
    Buffer.from(
      JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/signed', type: 'signed.sent', data: { n } }),
    );
  const signed = (key: string, id: string, body: Buffer, at = new Date()) => ({
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(key).sign(id, at, body),
  });
  const publish = async (instance: RunningInstance, body: Buffer, headers: Record<string, string>) => {
    const response = await fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json', ...headers },
      body,
    });
    return {
      status: response.status,
      body: (await response.json()) as Record<string, unknown>,
      challenge: response.headers.get('www-authenticate'),
    };
  };
  const secretsUrl = (instance: RunningInstance, principal = 'anonymous') =>
    `${instance.url}/admin/publishers/${principal}/secrets`;

  it('registers publisher secrets through the admin API: shown once, sealed at rest, two at most', async () => {
    const created = await fetch(secretsUrl(a), { method: 'POST', headers: adminHeaders });
    expect(created.status).toBe(201);
    const body = (await created.json()) as { id: string; principal: string; createdAt: string; secret: string };
    expect(body).toEqual({
      id: expect.any(String),
      principal: 'anonymous',
      createdAt: expect.any(String),
      secret: expect.stringMatching(/^whsec_/),
    });
    [secret, secretId] = [body.secret, body.id];

    const listed = (await (await fetch(secretsUrl(b), { headers: adminHeaders })).json()) as Record<string, unknown>[];
    expect(listed).toEqual([{ id: secretId, principal: 'anonymous', createdAt: body.createdAt }]);

    const [row] = (await a.deps.db.query('SELECT tenant, secret FROM publisher_secrets WHERE id = $1', [secretId])) as {
      tenant: string;
      secret: string;
    }[];
    expect(row.tenant).toBe('default');
    expect(row.secret).toMatch(/^v1:test:/);
    expect(row.secret).not.toContain(secret.slice('whsec_'.length));

    const second = await fetch(secretsUrl(a), { method: 'POST', headers: adminHeaders });
    expect(second.status).toBe(201);
    const third = await fetch(secretsUrl(a), { method: 'POST', headers: adminHeaders });
    expect(third.status).toBe(409);
    expect(((await third.json()) as { code: string }).code).toBe('SECRET_LIMIT_REACHED');
    const secondId = ((await second.json()) as { id: string }).id;
    expect((await fetch(`${secretsUrl(a)}/${secondId}`, { method: 'DELETE', headers: adminHeaders })).status).toBe(204);
    expect((await fetch(`${secretsUrl(a)}/${secondId}`, { method: 'DELETE', headers: adminHeaders })).status).toBe(404);
  });

  it('accepts a signed publish on A; the same webhook-id replayed on B is refused 401 and the topic does not move', async () => {
    const body = event(1);
    const headers = signed(secret, `msg-${randomUUID()}`, body);
    const accepted = await publish(a, body, headers);
    expect(accepted.status).toBe(202);
    const before = await endOffsets();
    expect(before).toBeGreaterThanOrEqual(1);

    const replayed = await publish(b, body, headers);
    expect(replayed).toMatchObject({
      status: 401,
      body: { code: 'UNAUTHENTICATED', message: expect.stringContaining('already used') },
    });
    expect(replayed.challenge).toMatch(/^Bearer/);
    // And on A too: the id is spent on the whole runtime.
    expect((await publish(a, body, headers)).status).toBe(401);
    expect(await endOffsets()).toBe(before);
    const health = (await (await fetch(`${b.url}/health`)).json()) as {
      stats: { security: { ingress: { denied: Record<string, number> } } };
    };
    expect(health.stats.security.ingress.denied['signature:replayed']).toBe(1);
  });

  it('refuses on B an unsigned, a badly signed and a stale publish of the principal, writing nothing', async () => {
    const before = await endOffsets();
    const body = event(2);
    const other = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const cases: [string, Record<string, string>, string][] = [
      ['unsigned', {}, 'required'],
      ['another secret', signed(other, `msg-${randomUUID()}`, body), 'matches no secret'],
      ['stale', signed(secret, `msg-${randomUUID()}`, body, new Date(Date.now() - 10 * 60_000)), 'from the gateway'],
    ];
    for (const [name, headers, message] of cases) {
      const refused = await publish(b, body, headers);
      expect({ name, status: refused.status, message: refused.body.message }).toEqual({
        name,
        status: 401,
        message: expect.stringContaining(message),
      });
    }
    expect(await endOffsets()).toBe(before);
    // A good signature with a fresh id still passes on B.
    expect((await publish(b, body, signed(secret, `msg-${randomUUID()}`, body))).status).toBe(202);
    expect(await endOffsets()).toBe(before + 1);
  });

  it('claims an id once across concurrent claims, takes over an expired row, and purges expired ids in small batches', async () => {
    const ledger = new SignatureReplayLedger(a.deps.db);
    const tenant = `purge-${suffix}`;
    const later = new Date(Date.now() + 60_000);
    const claims = await Promise.all(
      [new SignatureReplayLedger(a.deps.db), new SignatureReplayLedger(b.deps.db)].map((l) =>
        l.claim(tenant, 'p', 'same-id', later),
      ),
    );
    expect(claims.sort()).toEqual([false, true]);
    await a.deps.db.query(
      `INSERT INTO signature_replays (tenant, principal, webhook_id, expires_at) SELECT $1, 'p', 'old-' || n, now() - interval '1 minute' FROM generate_series(1, 5) n`,
      [tenant],
    );
    // An expired row not purged yet does not make the id's next use a replay.
    expect(await ledger.claim(tenant, 'p', 'old-1', later)).toBe(true);
    expect(await ledger.claim(tenant, 'p', 'old-1', later)).toBe(false);
    expect(await ledger.purge(3)).toBe(3);
    expect(await ledger.purge(3)).toBe(1);
    expect(await ledger.purge(3)).toBe(0);
    const left = (await a.deps.db.query(
      `SELECT webhook_id FROM signature_replays WHERE tenant = $1 ORDER BY webhook_id`,
      [tenant],
    )) as { webhook_id: string }[];
    expect(left.map((r) => r.webhook_id)).toEqual(['old-1', 'same-id']);
  });
});
