import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { DevSigningKey, ensureDevSigningKey, mintDevToken, parseMintArgs } from '@libs/security/dev-token';
import { testConfig, testEnv, uniqueTopic } from '../support/env';
import { rawExchange } from '../support/raw-exchange';

/**
 * A report-only gate hands out no power (docs/security.md, Modes): both gates run TokenAuth without enforcing and
 * the operator tenant is `default`, the tenant a refused caller runs as. Credentials, ACL rules, quotas, operator
 * routes and `config.trusted` still want an authenticated caller with the scope: a refusal is answered (and
 * audited), and nothing is written. A real operator JWT still does all of it.
 */
describe('report-only gates (real gateway)', () => {
  const VICTIM = `victim-${randomUUID().slice(0, 8)}`;
  const topic = uniqueTopic('reportonly');
  let dir: string;
  let signing: DevSigningKey;
  let instance: RunningInstance;
  const jwt = (tenant: string, scopes: string) =>
    mintDevToken(signing, parseMintArgs(['--tenant', tenant, '--scopes', scopes, '--sub', `${tenant}-admin`]));
  const GARBAGE = { authorization: 'Bearer not-a-token' };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'report-only-spec-'));
    signing = await ensureDevSigningKey(dir);
    instance = await startInstance(
      testConfig({
        EVENTMESH_INSTANCE_ID: `reportonly-${randomUUID().slice(0, 8)}`,
        EVENTMESH_KAFKA_TOPICS: topic,
        EVENTMESH_HTTP_PORT: '0',
        EVENTMESH_SECURITY_GATE_FILTERS: 'token',
        EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'false',
        EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
        EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'false',
        EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: signing.jwksPath,
        EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: 'eventmesh-dev',
        EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: 'eventmesh',
      }),
      { roles: ['gateway'] },
    );
  });
  afterAll(async () => {
    await instance?.deps.db.query('DELETE FROM tenant_quotas WHERE tenant = $1', [VICTIM]).catch(() => undefined);
    await instance?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = (method: string, path: string, headers: Record<string, string>, body?: unknown) =>
    fetch(`${instance.url}${path}`, {
      method,
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  const count = async (sql: string, params: unknown[]) =>
    Number(((await instance.deps.db.query(sql, params)) as { n: string }[])[0].n);

  it('refuses a garbage token a tenant quota change (401) and changes nothing; an operator JWT changes it', async () => {
    const refused = await call('PUT', `/admin/tenants/${VICTIM}/quota`, GARBAGE, { eventsPerSecond: 1 });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(await count('SELECT count(*) AS n FROM tenant_quotas WHERE tenant = $1', [VICTIM])).toBe(0);

    const operator = { authorization: `Bearer ${await jwt('default', 'admin')}` };
    expect((await call('PUT', `/admin/tenants/${VICTIM}/quota`, operator, { eventsPerSecond: 5 })).status).toBe(200);
  });

  it('refuses an unauthenticated caller an API key for any tenant (401), and writes none', async () => {
    for (const headers of [{}, GARBAGE]) {
      const refused = await call('POST', '/admin/api-keys', headers, {
        name: 'stolen',
        scopes: ['publish', 'admin'],
        tenant: VICTIM,
      });
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    }
    expect(await count('SELECT count(*) AS n FROM api_keys WHERE tenant = $1', [VICTIM])).toBe(0);
  });

  it('refuses an unauthenticated caller publisher secrets, ACL rules and operator routes (401)', async () => {
    const refusals = [
      await call('POST', '/admin/publishers/anonymous/secrets', GARBAGE),
      await call('POST', '/admin/acl/rules', GARBAGE, {
        subject: 'tenant:*',
        action: '*',
        topic: '*',
        effect: 'ALLOW',
      }),
      await call('GET', '/admin/subscriptions/orphans', {}),
    ];
    for (const refused of refusals) {
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    }
    expect(
      await count(
        `SELECT count(*) AS n FROM publisher_secrets WHERE tenant = 'default' AND principal = 'anonymous'`,
        [],
      ),
    ).toBe(0);
  });

  it('does not let a refused token skip the validation handshake (config.trusted: 403), and writes no subscription', async () => {
    const before = await count(`SELECT count(*) AS n FROM subscriptions WHERE topic = $1`, [topic]);
    const refused = await call('POST', '/subscriptions', GARBAGE, {
      topic,
      sink: 'http://127.0.0.1:9/never',
      config: { trusted: true },
    });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ code: 'FORBIDDEN', field: 'config.trusted' });
    expect(await count(`SELECT count(*) AS n FROM subscriptions WHERE topic = $1`, [topic])).toBe(before);
  });

  it('bootstraps the first operator credential once with `npm run key:bootstrap` beside the database', async () => {
    // The built script (npm run build), with the runtime's settings, as an operator runs it.
    const run = () =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        execFile(
          'node',
          [join(__dirname, '..', '..', 'dist', 'scripts', 'bootstrap-key.js')],
          { env: { ...process.env, ...testEnv() } },
          (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
        );
      });
    const first = await run();
    expect(first).toMatchObject({ code: 0, stdout: expect.stringMatching(/^emk_\S+\n$/) });
    const key = first.stdout.trim();
    expect(first.stderr).not.toContain(key);
    const operator = { authorization: `Bearer ${key}` };
    expect((await call('PUT', `/admin/tenants/${VICTIM}/quota`, operator, { eventsPerSecond: 7 })).status).toBe(200);

    const second = await run();
    expect(second.code).toBe(1);
    expect(second.stdout).toBe('');
    expect(second.stderr).toMatch(/^key:bootstrap: a bootstrap key \(\S+\) of tenant default is not revoked/);
    const id = key.split('_')[1];
    expect((await call('DELETE', `/admin/api-keys/${id}`, operator)).status).toBe(204);
  });

  it('still lets the data path through report-only: a refused token publishes as before (202)', async () => {
    const published = await fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { ...GARBAGE, 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({
        specversion: '1.0',
        id: randomUUID(),
        source: '/report-only',
        type: 'test.published',
        data: { n: 1 },
      }),
    });
    expect(published.status).toBe(202);
  });

  it('refuses an unauthenticated admin request 401 before reading its body, and closes the connection', async () => {
    // The headers promise a body that never comes: only an answer given before the body is read can arrive.
    const { status, closed } = await rawExchange(
      Number(new URL(instance.url!).port),
      `POST /admin/api-keys HTTP/1.1\r\nHost: 127.0.0.1\r\nauthorization: Bearer not-a-token\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n`,
    );
    expect(status).toBe('HTTP/1.1 401 Unauthorized');
    await closed;
  });
});
