import { randomUUID } from 'node:crypto';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { testConfig, uniqueTopic } from '../support/env';

/**
 * The operator's side of orphaned subscriptions on a real gateway and Postgres: the listing, `/health`, and
 * `POST /admin/subscriptions/{id}/move` with its refusals. Dispatch runs are rows written by the test (live:
 * renewed now; dead: a minute ago), so no worker runs.
 */
describe('admin: orphaned subscriptions and moves (real Postgres)', () => {
  const topic = uniqueTopic('admin-orphans');
  const suffix = randomUUID().slice(0, 8);
  const [dead, live, other] = [`dead-${suffix}`, `live-${suffix}`, `other-${suffix}`];
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `admin-${suffix}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_DELIVERY_ORPHAN_GRACE_MS: '20000',
    EVENTMESH_DELIVERY_ORPHAN_TAKEOVER: 'MANUAL',
  });
  let instance: RunningInstance;

  beforeAll(async () => {
    instance = await startInstance(config, { roles: ['gateway'] });
    await instance.deps.db.query(
      `INSERT INTO dispatch_runs (instance_id, epoch, renewed_at) VALUES ($1, 4, now() - interval '1 minute'), ($2, 1, now()), ($3, 1, now())`,
      [dead, live, other],
    );
  });
  afterAll(() => instance?.close());

  const subscription = async (instanceId: string) => {
    const id = randomUUID();
    await instance.deps.db.query(
      `INSERT INTO subscriptions (id, topic, protocol, sink, instance_id, status, created_at, updated_at)
       VALUES ($1, $2, 'HTTP', 'http://127.0.0.1:9/hook', $3, 'ACTIVE', now() - interval '2 minutes', now() - interval '2 minutes')`,
      [id, topic, instanceId],
    );
    return id;
  };
  const move = async (id: string, body: unknown) => {
    const response = await fetch(`${instance.url}/admin/subscriptions/${id}/move`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const epochOf = async (instanceId: string) =>
    Number(
      (
        (await instance.deps.db.query(`SELECT epoch FROM dispatch_runs WHERE instance_id = $1`, [instanceId])) as {
          epoch: string;
        }[]
      )[0].epoch,
    );

  it('lists the orphans with their instance and since when, and warns on /health while any exist', async () => {
    const orphan = await subscription(dead);
    await subscription(live);
    const listing = (await (await fetch(`${instance.url}/admin/subscriptions/orphans`)).json()) as {
      graceMs: number;
      takeover: string;
      liveInstances: string[];
      orphans: {
        subscription: string;
        instance: string;
        lastRenewedAt: string;
        orphanedSince: string;
        topic: string;
      }[];
    };
    expect(listing).toMatchObject({ graceMs: 20000, takeover: 'MANUAL' });
    expect(listing.liveInstances).toEqual(expect.arrayContaining([live, other]));
    const mine = listing.orphans.filter((o) => o.topic === topic);
    expect(mine).toEqual([
      {
        subscription: orphan,
        topic,
        protocol: 'HTTP',
        instance: dead,
        lastRenewedAt: expect.any(String),
        orphanedSince: expect.any(String),
      },
    ]);
    expect(Date.parse(mine[0].orphanedSince) - Date.parse(mine[0].lastRenewedAt)).toBe(20000);

    const health = await fetch(`${instance.url}/health`);
    const report = (await health.json()) as {
      stats: { orphans: { count: number; instances: string[] } };
      warnings: { code: string; count: number }[];
    };
    expect(report.stats.orphans.count).toBeGreaterThanOrEqual(1);
    expect(report.stats.orphans.instances).toContain(dead);
    // Other specs of the run share the database and may leave other warnings (skipped events): this one is the orphans'.
    expect(report.warnings.filter((w) => w.code === 'ORPHANED_SUBSCRIPTIONS')).toEqual([
      expect.objectContaining({ code: 'ORPHANED_SUBSCRIPTIONS', count: report.stats.orphans.count }),
    ]);
  });

  it('moves a subscription to a live instance, answering from, to and the fenced epoch', async () => {
    const id = await subscription(dead);
    const before = await epochOf(dead);
    expect(await move(id, { to: live })).toEqual({
      status: 200,
      body: { subscription: id, from: dead, to: live, moved: true, fencedEpoch: before + 1 },
    });
    expect(await epochOf(dead)).toBe(before + 1);
    const listed = (await (await fetch(`${instance.url}/subscriptions/${id}`)).json()) as { instance: string };
    expect(listed.instance).toBe(live);
    // Again: already there, nothing changes.
    expect(await move(id, { to: live })).toEqual({
      status: 200,
      body: { subscription: id, from: live, to: live, moved: false, fencedEpoch: null },
    });
    expect(await epochOf(dead)).toBe(before + 1);
  });

  it('refuses with 409 INSTANCE_NOT_LIVE a target with no live dispatch run, unless forced', async () => {
    const id = await subscription(dead);
    const before = await epochOf(dead);
    const refused = await move(id, { to: `nowhere-${suffix}` });
    expect(refused).toMatchObject({
      status: 409,
      body: { code: 'INSTANCE_NOT_LIVE', subscription: id, to: `nowhere-${suffix}` },
    });
    expect(await move(id, { to: dead })).toMatchObject({ status: 200, body: { moved: false } });
    expect(await epochOf(dead)).toBe(before);
    expect(await move(id, { to: `nowhere-${suffix}`, force: true })).toMatchObject({
      status: 200,
      body: { from: dead, moved: true, fencedEpoch: before + 1 },
    });
  });

  it('refuses with 409 PLACEMENT_CONFLICT a move from an instance the subscription is no longer on', async () => {
    const id = await subscription(other);
    expect(await move(id, { to: live, from: dead })).toMatchObject({
      status: 409,
      body: { code: 'PLACEMENT_CONFLICT', from: dead, current: other },
    });
    expect(await move(id, { to: live, from: other })).toMatchObject({
      status: 200,
      body: { from: other, to: live, moved: true },
    });
  });

  it('answers 404 for an unknown subscription and 400 for a bad body, changing nothing', async () => {
    const id = await subscription(dead);
    const before = await epochOf(dead);
    expect(await move(randomUUID(), { to: live })).toMatchObject({
      status: 404,
      body: { code: 'SUBSCRIPTION_NOT_FOUND' },
    });
    expect(await move('not-a-uuid', { to: live })).toMatchObject({
      status: 404,
      body: { code: 'SUBSCRIPTION_NOT_FOUND' },
    });
    for (const body of [{}, { to: '' }, { to: 'has space' }, { to: live, force: 'yes' }, { to: live, extra: 1 }, []]) {
      const answer = await move(id, body);
      expect(answer).toMatchObject({ status: 400, body: { code: 'INVALID_REQUEST', message: expect.any(String) } });
    }
    expect(await epochOf(dead)).toBe(before);
  });
});
