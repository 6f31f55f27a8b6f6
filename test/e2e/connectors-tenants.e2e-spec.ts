import { randomUUID } from 'node:crypto';
import type { Client as PgClient } from 'pg';
import { connectorJobWorkflowIdOf } from '../../contracts';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { adminCaller, applicationDatabase, createOutbox, spawnConnectors } from '../support/connectors-app';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { TokenIssuer } from '../support/token-issuer';
import { waitFor } from '../support/wait-for';

const ISSUER = 'eventmesh-connectors-test';
const AUDIENCE = 'eventmesh';

/** What the tests read of `/admin/jobs` answers. */
interface JobBody {
  id: string;
  name: string;
  kind: string;
  state: string;
  moved: number;
  deadLettered: number;
  position: string | null;
  lastError: string | null;
  lag: { events: number | null; counts: string; error?: string };
  throughput: { eventsPerSecond: number };
  run: { epoch: number | null };
  spec: { mesh: Record<string, string>; config: { batchSize?: number } & Record<string, unknown> };
  code?: string;
  field?: string;
}

/**
 * The connector runtime behind an enforcing gate (TokenAuth on the ingress; TokenAuth and the ACL on both admin
 * APIs), two tenants `ta` and `tb`: each job's calls go through the event runtime's gate with the job's own
 * credential, a job of one tenant reaches none of the other's topics or subscriptions, and the admin API of the
 * connector runtime applies the event runtime's ACL rules. Then the job operations on tenant ta's outbox job:
 * dead letters browsed and replayed, pause, position reset, resume, restart, reconfigure, delete.
 */
describe('connector runtime: tenants, the gate, job operations', () => {
  const tag = randomUUID().slice(0, 6);
  const outbox = `tenants_outbox_${tag}`;
  const tokens = new Map<string, string>();
  let instance: InstanceProcess;
  let replica: InstanceProcess;
  let app: Awaited<ReturnType<typeof applicationDatabase>>;
  let db: PgClient;
  let temporal: Awaited<ReturnType<typeof temporalClient>>;
  const jobs: string[] = [];

  const call = (base: string, who: string, method: string, url: string, body?: unknown) =>
    adminCaller<JobBody>(() => base, tokens.get(who))(method, url, body);
  const mesh = (who: string, method: string, url: string, body?: unknown) =>
    call(instance.url!, who, method, url, body);
  const admin = (who: string, method: string, url: string, body?: unknown) =>
    call(replica.url!, who, method, url, body);
  const job = async (id: string) => (await admin('ta/alice', 'GET', `/admin/jobs/${id}`)).body!;
  /** A job create by ta/alice refused for its `mesh`: the answer, and the challenge header it must not carry. */
  const refusedCreate = async (name: string, meshCredential?: { token?: string; apiKey?: string }) => {
    const res = await fetch(`${replica.url}/admin/jobs`, {
      method: 'POST',
      signal: AbortSignal.timeout(30000),
      headers: { authorization: `Bearer ${tokens.get('ta/alice')}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: `${name}-${tag}`,
        kind: 'postgres-outbox',
        ...(meshCredential ? { mesh: meshCredential } : {}),
        config: { connection: app.connection, table: outbox },
      }),
    });
    return { status: res.status, challenge: res.headers.get('www-authenticate'), body: (await res.json()) as JobBody };
  };
  /**
   * A tenant's topic made, as a client makes it: a 503 (Kafka did not confirm the topic's leaders within the
   * runtime's wait, on a loaded host; the name not kept, retryable) is asked again; anything else must be the 201.
   */
  const createTopic = async (who: string, name: string) => {
    const answer = await waitFor(
      `topic ${name} made`,
      async () => {
        const made = await mesh(who, 'POST', '/topics', { name, partitions: 1 });
        return made.status === 503 ? undefined : made;
      },
      { timeoutMs: 120000, intervalMs: 500 },
    );
    expect(answer.status).toBe(201);
  };
  /** An outbox job of tenant ta reading its own outbox table, its calls made with `mesh`. */
  const outboxJob = async (name: string, meshCredential: { token?: string; apiKey?: string }) => {
    await createOutbox(db, `${outbox}_${name}`, { topic: true });
    const created = await admin('ta/alice', 'POST', '/admin/jobs', {
      name: `${name}-${tag}`,
      kind: 'postgres-outbox',
      mesh: meshCredential,
      config: { connection: app.connection, table: `${outbox}_${name}`, columns: { topic: 'topic' } },
    });
    expect(created.status).toBe(201);
    jobs.push(created.body!.id);
    return created.body!.id;
  };
  const insert = (name: string, topic: string) =>
    db.query(
      `INSERT INTO ${outbox}_${name} (aggregatetype, aggregateid, type, topic, payload)
       VALUES ('order', '1', 'order.created', $1, '{}')`,
      [topic],
    );

  beforeAll(async () => {
    const issuer = await TokenIssuer.create(ISSUER, AUDIENCE);
    for (const [tenant, principal] of [
      ['ta', 'alice'],
      ['ta', 'mallory'],
      ['tb', 'bob'],
    ])
      tokens.set(`${tenant}/${principal}`, await issuer.sign(tenant, principal, 'publish subscribe admin'));
    const gate = {
      EVENTMESH_SECURITY_GATE_FILTERS: 'token',
      EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
      EVENTMESH_ADMIN_SECURITY_FILTERS: 'token,acl',
      EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
      EVENTMESH_SECURITY_GATE_ACL_DEFAULT: 'ALLOW',
      EVENTMESH_SECURITY_GATE_ACL_REFRESH_MS: '250',
      EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: issuer.keysFile,
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: ISSUER,
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: AUDIENCE,
      // A revoked API key is refused at its next use.
      EVENTMESH_SECURITY_GATE_TOKEN_API_KEY_CACHE_MS: '0',
    };
    temporal = await temporalClient();
    app = await applicationDatabase();
    db = await app.client();
    instance = InstanceProcess.spawn({ ...gate, EVENTMESH_INSTANCE_ID: `cxt-${tag}` });
    await instance.ready();
    replica = spawnConnectors(`cxt-${tag}`, instance.url!, gate);
    await replica.ready();
    for (const [who, name] of [
      ['ta/alice', `orders-${tag}`],
      ['tb/bob', `secret-${tag}`],
    ])
      await createTopic(who, name);
  }, 120000);

  afterAll(async () => {
    for (const id of jobs) await admin('ta/alice', 'DELETE', `/admin/jobs/${id}`).catch(() => undefined);
    await replica?.stop();
    await instance?.stop();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(`cxt-${tag}`)]);
    await temporal.close();
    await db?.query(`DROP TABLE IF EXISTS ${outbox}_key, ${outbox}_reach, ${outbox}_cycle`);
    await db?.end();
  }, 120000);

  it("each job's calls pass the gate with the job's own credential: none, a malformed or a revoked one refused at create (400 naming it, no challenge to the caller), a revoked key stops the job", async () => {
    // The job's credential is refused, not the caller's: a 400 naming the field, without WWW-Authenticate.
    const refusedMesh = (field: string) => ({
      status: 400,
      challenge: null,
      body: { code: 'INVALID_REQUEST', field },
    });
    expect(await refusedCreate('none')).toMatchObject(refusedMesh('mesh'));
    expect(await refusedCreate('token', { token: 'not-a-token' })).toMatchObject(refusedMesh('mesh.token'));
    expect(await refusedCreate('apikey', { apiKey: 'nope' })).toMatchObject(refusedMesh('mesh.apiKey'));
    const key = (await mesh('ta/alice', 'POST', '/admin/api-keys', { name: `job-${tag}`, scopes: ['publish'] }))
      .body as unknown as { id: string; key: string };
    const id = await outboxJob('key', { apiKey: key.key });
    await insert('key', `orders-${tag}`);
    await waitFor('the row published with the key', async () => (await job(id)).moved === 1);
    expect((await mesh('ta/alice', 'DELETE', `/admin/api-keys/${key.id}`)).status).toBe(204);
    expect(await refusedCreate('revoked', { apiKey: key.key })).toMatchObject(refusedMesh('mesh.apiKey'));
    await insert('key', `orders-${tag}`);
    await waitFor('the gate refused the revoked key', async () => (await job(id)).lastError !== null);
    expect((await job(id)).lastError).toBe('the API key has been revoked');
    expect(await job(id)).toMatchObject({ moved: 1, deadLettered: 0 });
  });

  it("a job of tenant ta reaches none of tenant tb's topics or subscriptions; tb's credential is refused in ta's job", async () => {
    expect(
      (
        await admin('ta/alice', 'POST', '/admin/jobs', {
          name: `stolen-${tag}`,
          kind: 'postgres-outbox',
          mesh: { token: tokens.get('tb/bob') },
          config: { connection: app.connection, table: outbox },
        })
      ).body,
    ).toMatchObject({ code: 'INVALID_REQUEST', field: 'mesh' });

    const source = await outboxJob('reach', { token: tokens.get('ta/alice') });
    // tb's topic by its short name (read in ta's tenant: no such topic) and by its Kafka name; then ta's own.
    for (const topic of [`secret-${tag}`, `tenant.tb.secret-${tag}`, `orders-${tag}`]) await insert('reach', topic);
    await waitFor('the three rows read', async () => {
      const now = await job(source);
      return now.moved + now.deadLettered === 3;
    });
    expect(await job(source)).toMatchObject({ moved: 1, deadLettered: 2 });
    const dead = (await admin('ta/alice', 'GET', `/admin/jobs/${source}/dead-letters`)).body as unknown as {
      reason: string;
    }[];
    expect(dead.map((d) => d.reason.split(':')[0])).toEqual(['UNKNOWN_TOPIC', 'UNKNOWN_TOPIC']);

    // tb's subscription id in ta's sink job: the runtime answers it as no subscription, and nothing is read.
    const subscription = await mesh('tb/bob', 'POST', '/subscriptions', {
      protocol: 'STREAM',
      topic: `secret-${tag}`,
    });
    expect(subscription.status).toBe(201);
    const sink = await admin('ta/alice', 'POST', '/admin/jobs', {
      name: `sink-${tag}`,
      kind: 'postgres-table',
      mesh: { token: tokens.get('ta/alice') },
      config: {
        subscriptionId: subscription.body!.id,
        connection: app.connection,
        table: `${outbox}_reach`,
        columns: { type: 'type' },
      },
    });
    expect(sink.status).toBe(201);
    jobs.push(sink.body!.id);
    await waitFor('the sink job refused', async () =>
      /subscription \S+ does not exist$/.test((await job(sink.body!.id)).lastError ?? ''),
    );
    expect(await job(sink.body!.id)).toMatchObject({ moved: 0 });

    // tb's admin sees none of ta's jobs.
    expect((await admin('tb/bob', 'GET', `/admin/jobs/${source}`)).status).toBe(404);
    expect((await admin('tb/bob', 'GET', '/admin/jobs')).body).toEqual([]);
  });

  it("applies the event runtime's ACL rules on its admin API: a DENY of the admin action is a 403", async () => {
    const rule = await mesh('ta/alice', 'POST', '/admin/acl/rules', {
      subject: 'principal:mallory',
      action: 'admin',
      topic: '*',
      effect: 'DENY',
    });
    expect(rule.status).toBe(201);
    await waitFor(
      'the DENY rule applies',
      async () => (await admin('ta/mallory', 'GET', '/admin/jobs')).status === 403,
    );
    expect((await admin('ta/mallory', 'GET', '/admin/jobs')).body).toMatchObject({ code: 'FORBIDDEN' });
    expect((await admin('ta/alice', 'GET', '/admin/jobs')).status).toBe(200);
  });

  it('job operations: replay a dead letter, pause, reset the position, resume, restart, reconfigure, delete', async () => {
    const id = jobs[1];
    // The row to tb's topic by its short name: ta makes a topic of that name, and the replay goes through.
    await createTopic('ta/alice', `secret-${tag}`);
    const [first] = (await admin('ta/alice', 'GET', `/admin/jobs/${id}/dead-letters?limit=1`)).body as unknown as {
      id: string;
    }[];
    expect(await admin('ta/alice', 'POST', `/admin/jobs/${id}/dead-letters/${first.id}/replay`)).toMatchObject({
      status: 200,
      body: { id: first.id, replayed: true },
    });
    // Replayed once: not twice.
    expect(await admin('ta/alice', 'POST', `/admin/jobs/${id}/dead-letters/${first.id}/replay`)).toMatchObject({
      status: 409,
      body: { code: 'DEAD_LETTER_RESOLVED', resolution: 'replayed', replayedAt: expect.any(String) },
    });

    expect((await admin('ta/alice', 'POST', `/admin/jobs/${id}/position`, { position: null })).status).toBe(409);
    expect((await admin('ta/alice', 'POST', `/admin/jobs/${id}/pause`)).status).toBe(202);
    await waitFor('the job paused', async () => (await job(id)).state === 'PAUSED');
    const paused = await job(id);
    expect(paused.lag).toEqual({ events: 0, counts: 'source records after the committed position' });
    expect(paused.throughput.eventsPerSecond).toBeGreaterThan(0);
    await insert('reach', `orders-${tag}`);
    // The lag counts the outbox rows after the position: the new one; after a reset to the start, all four.
    expect((await job(id)).lag.events).toBe(1);
    expect((await admin('ta/alice', 'POST', `/admin/jobs/${id}/position`, { position: 7 })).body).toMatchObject({
      code: 'INVALID_REQUEST',
      field: 'position',
    });
    const reset = await admin('ta/alice', 'POST', `/admin/jobs/${id}/position`, { position: null });
    expect(reset).toMatchObject({ status: 200, body: { position: null } });
    expect(reset.body!.run.epoch).toBeGreaterThan(paused.run.epoch!);
    expect((await job(id)).lag.events).toBe(paused.moved + paused.deadLettered + 1);

    // From the start again: the three rows read again (the same events) and the new one.
    expect((await admin('ta/alice', 'POST', `/admin/jobs/${id}/resume`)).status).toBe(202);
    await waitFor('the rows read again from the start', async () => {
      const now = await job(id);
      return now.state === 'RUNNING' && now.moved + now.deadLettered === paused.moved + paused.deadLettered + 4;
    });

    const before = await job(id);
    expect((await admin('ta/alice', 'POST', `/admin/jobs/${id}/restart`)).status).toBe(202);
    await waitFor('a new run', async () => (await job(id)).run.epoch! > before.run.epoch!);

    const reconfigured = await admin('ta/alice', 'PUT', `/admin/jobs/${id}/config`, {
      mesh: { token: tokens.get('ta/alice') },
      config: { connection: app.connection, table: `${outbox}_reach`, columns: { topic: 'topic' }, batchSize: 7 },
    });
    expect(reconfigured).toMatchObject({ status: 200, body: { spec: { config: { batchSize: 7 } } } });
    expect(
      (await admin('ta/alice', 'PUT', `/admin/jobs/${id}/config`, { config: { connection: app.connection } })).body,
    ).toMatchObject({ code: 'INVALID_REQUEST', field: 'config.table' });

    expect((await admin('ta/alice', 'DELETE', `/admin/jobs/${id}`)).status).toBe(204);
    expect((await admin('ta/alice', 'GET', `/admin/jobs/${id}`)).status).toBe(404);
    const described = await temporal.client.workflow.getHandle(connectorJobWorkflowIdOf(id)).describe();
    expect(described.status.name).toBe('TERMINATED');
  }, 120000);

  /** The outbox job of the cases below: made by the first, paused and reset, its workflow terminated after. */
  let cycle: string;
  const cycleConfig = () => ({ connection: app.connection, table: `${outbox}_cycle`, columns: { topic: 'topic' } });

  it("a reconfigure cannot change the job's kind or name: 400 naming the field, nothing stored", async () => {
    cycle = await outboxJob('cycle', { token: tokens.get('ta/alice') });
    for (const [change, field] of [
      [{ kind: 'postgres-table' }, 'kind'],
      [{ name: `other-${tag}` }, 'name'],
    ] as const) {
      const answer = await admin('ta/alice', 'PUT', `/admin/jobs/${cycle}/config`, {
        ...change,
        mesh: { token: tokens.get('ta/alice') },
        config: { ...cycleConfig(), batchSize: 3 },
      });
      expect({ change, answer }).toMatchObject({
        change,
        answer: { status: 400, body: { code: 'INVALID_REQUEST', field } },
      });
    }
    const now = await job(cycle);
    expect(now).toMatchObject({ name: `cycle-${tag}`, kind: 'postgres-outbox' });
    expect(now.spec.config.batchSize).toBeUndefined();
  });

  it('the spec GET shows, sent back with its "(sealed)" secrets, keeps the stored password and credential: the next run moves rows', async () => {
    await waitFor("the job's first run", async () => (await job(cycle)).run.epoch !== null);
    const before = await job(cycle);
    expect(before.spec.mesh).toEqual({ token: '(sealed)' });
    expect(before.spec.config.connection).toMatchObject({ password: '(sealed)' });
    const put = await admin('ta/alice', 'PUT', `/admin/jobs/${cycle}/config`, {
      mesh: before.spec.mesh,
      config: { ...before.spec.config, batchSize: 5 },
    });
    expect(put).toMatchObject({ status: 200, body: { spec: { config: { batchSize: 5 } } } });
    // A run started after the reconfigure (it reads the stored config) publishes the row.
    await waitFor('a run of the new config', async () => (await job(cycle)).run.epoch! > before.run.epoch!);
    await insert('cycle', `orders-${tag}`);
    await waitFor('the row published', async () => (await job(cycle)).moved === before.moved + 1);
    expect(await job(cycle)).toMatchObject({ lastError: null, deadLettered: 0 });
  });

  it("the dead letters' limit is a whole number from 1 to 1000 in digits: anything else is a 400 naming limit", async () => {
    for (const limit of ['2.5', 'abc', '-7', '0', '0x10', '1001', '', '1e2', ' 5']) {
      const answer = await admin(
        'ta/alice',
        'GET',
        `/admin/jobs/${cycle}/dead-letters?limit=${encodeURIComponent(limit)}`,
      );
      expect({ limit, answer }).toMatchObject({
        limit,
        answer: { status: 400, body: { code: 'INVALID_REQUEST', field: 'limit' } },
      });
    }
    for (const query of ['?limit=1000', '?limit=1', ''])
      expect((await admin('ta/alice', 'GET', `/admin/jobs/${cycle}/dead-letters${query}`)).status).toBe(200);
  });

  it("a position reset takes only a position the source can read (the outbox's <txid>:<id>): else a 400 naming position, nothing changed", async () => {
    // A row read, so the job has a position of the source's own.
    const read = (await job(cycle)).moved;
    await insert('cycle', `orders-${tag}`);
    await waitFor('the row published', async () => (await job(cycle)).moved === read + 1);
    expect((await admin('ta/alice', 'POST', `/admin/jobs/${cycle}/pause`)).status).toBe(202);
    await waitFor('the job paused', async () => (await job(cycle)).state === 'PAUSED');
    const paused = await job(cycle);
    expect(paused.position).toMatch(/^\d+:\d+$/);
    for (const position of ['garbage', '', '90368', ':5', 'x:5', ' 1:5']) {
      const answer = await admin('ta/alice', 'POST', `/admin/jobs/${cycle}/position`, { position });
      expect({ position, answer }).toMatchObject({
        position,
        answer: { status: 400, body: { code: 'INVALID_REQUEST', field: 'position' } },
      });
    }
    expect(await job(cycle)).toMatchObject({ position: paused.position, run: { epoch: paused.run.epoch } });
    // A position the source wrote is taken.
    expect(
      await admin('ta/alice', 'POST', `/admin/jobs/${cycle}/position`, { position: paused.position }),
    ).toMatchObject({ status: 200, body: { position: paused.position } });
  });

  it('a job whose workflow is gone (terminated in the Temporal UI): resume starts it again (202, not 500) and the job moves rows', async () => {
    const workflow = temporal.client.workflow.getHandle(connectorJobWorkflowIdOf(cycle));
    await workflow.terminate('terminated by the test');
    const before = await job(cycle);
    expect((await admin('ta/alice', 'POST', `/admin/jobs/${cycle}/resume`)).status).toBe(202);
    await waitFor('the job running again', async () => (await job(cycle)).state === 'RUNNING');
    await insert('cycle', `orders-${tag}`);
    await waitFor('the row published', async () => (await job(cycle)).moved === before.moved + 1);
    expect((await workflow.describe()).status.name).toBe('RUNNING');
    expect((await admin('ta/alice', 'POST', `/admin/jobs/${cycle}/restart`)).status).toBe(202);
  }, 120000);
});
