import type { Caller } from './caller';
import type { GateRequest, Verdict } from './gate-filter';
import { shareOf } from './quota-share';
import { QuotaLimits, QuotaUsageExchange, TenantQuotaFilter, TenantQuotaSource } from './tenant-quota-filter';
import { TokenBucket } from './token-bucket';

describe('TokenBucket', () => {
  it.each([
    // [rate, capacity, takes at times (ms), expected outcomes]
    [
      'a full bucket gives its burst at once',
      10,
      20,
      Array.from({ length: 21 }, () => [0, 1] as const),
      [...Array(20).fill(true), false],
    ],
    [
      'refills at the rate',
      10,
      1,
      [
        [0, 1],
        [50, 1],
        [100, 1],
        [150, 1],
        [200, 1],
      ] as const,
      [true, false, true, false, true],
    ],
    [
      'never holds more than its capacity',
      10,
      2,
      [
        [0, 2],
        [10_000, 2],
        [10_000, 1],
      ] as const,
      [true, true, false],
    ],
    [
      'a take above the capacity passes when full, and leaves a debt',
      10,
      5,
      [
        [0, 8],
        [100, 1],
        [399, 1],
        [900, 5],
      ] as const,
      [true, false, false, true],
    ],
  ])('%s', (_, rate, capacity, takes, expected) => {
    const bucket = new TokenBucket(rate, capacity, 0);
    expect(takes.map(([at, n]) => bucket.take(n, at).taken)).toEqual(expected);
  });

  it('says how long until it has room, in whole seconds, at least 1', () => {
    const bucket = new TokenBucket(2, 10, 0);
    bucket.take(10, 0);
    expect(bucket.take(5, 0)).toEqual({ taken: false, remaining: 0, retryAfterSeconds: 3 });
    expect(bucket.take(1, 0)).toMatchObject({ taken: false, retryAfterSeconds: 1 });
  });

  it('keeps what it earned when reshaped, up to the new capacity', () => {
    const bucket = new TokenBucket(10, 100, 0, 0);
    bucket.reshape(5, 3, 1000);
    expect(bucket.level(1000)).toBe(3);
    bucket.take(3, 1000);
    expect(bucket.level(1200)).toBe(1);
  });
});

describe('shareOf', () => {
  it.each([
    ['alone', 100, [], 1],
    ['two equal demands', 500, [500], 0.5],
    ['demands above the rate weigh as the rate', 5000, [200], 0.5],
    ['proportional below the rate', 50, [150], 0.25],
    ['an idle instance keeps a thousandth-weight share', 0, [200], 0.2 / 200.2],
    ["nobody's demand known: even", 0, [0, 0], 1 / 3],
  ] as const)('%s', (_, mine, others, expected) => {
    expect(shareOf(mine, others, 200)).toBeCloseTo(expected, 6);
  });

  it('the shares of instances computed from the same reports sum to 1', () => {
    const demands = [0, 3, 180, 999, 5000];
    const sum = demands.reduce(
      (s, d, i) =>
        s +
        shareOf(
          d,
          demands.filter((_, j) => j !== i),
          200,
        ),
      0,
    );
    expect(sum).toBeCloseTo(1, 9);
  });
});

describe('TenantQuotaFilter across instances (simulated time, a usage table that behaves like quota_usage)', () => {
  const LIMITS: QuotaLimits = {
    eventsPerSecond: 200,
    bytesPerSecond: 1024 * 1024,
    burstSeconds: 1,
    streamConnections: 3,
    subscriptions: 2,
  };
  const SYNC_MS = 250;
  const caller: Caller = { principal: 'p', tenant: 'acme', scopes: ['publish'], via: 'jwt' };
  const publish = (bytes = 100): GateRequest => ({
    route: 'POST /events/publish',
    action: 'publish',
    topic: 't',
    headers: {},
    remoteAddress: '127.0.0.1',
    requestId: 'r',
    publish: { events: 1, bytes },
  });

  /** quota_usage: rows by (tenant, instance), written at the (shared) clock; fresh ones read by the others. */
  function usageTable(clock: () => number): QuotaUsageExchange {
    const rows = new Map<
      string,
      { tenant: string; instanceId: string; eventsDemand: number; bytesDemand: number; streams: number; at: number }
    >();
    return {
      exchange: (instanceId, mine, freshMs) => {
        for (const u of mine) rows.set(`${u.tenant}/${instanceId}`, { ...u, instanceId, at: clock() });
        return Promise.resolve(
          [...rows.values()].filter((r) => r.instanceId !== instanceId && r.at > clock() - freshMs),
        );
      },
      forget: (instanceId) => {
        for (const [k, r] of rows) if (r.instanceId === instanceId) rows.delete(k);
        return Promise.resolve();
      },
      expire: () => Promise.resolve(0),
    };
  }
  const noOverrides: TenantQuotaSource = {
    version: () => Promise.resolve(0),
    snapshot: () => Promise.resolve({ version: 0, quotas: [] }),
    subscriptionCount: () => Promise.resolve(0),
  };

  let filters: TenantQuotaFilter[] = [];
  afterEach(async () => {
    for (const f of filters) await f.close();
    filters = [];
  });

  /** Two instances publishing as fast as asked for `seconds`, each syncing every SYNC_MS: events admitted in all. */
  async function run(seconds: number, attemptsPerMsPerInstance: number, share: 'shared' | 'isolated'): Promise<number> {
    let now = 0;
    const clock = () => now;
    const table = usageTable(clock);
    const make = (id: string) =>
      new TenantQuotaFilter(noOverrides, share === 'shared' ? table : usageTable(clock), {
        instanceId: id,
        defaults: LIMITS,
        syncMs: SYNC_MS,
        refreshMs: 1000,
        clock,
      });
    filters = [make('a'), make('b')];
    for (const f of filters) await f.sync();
    let admitted = 0;
    for (now = 0; now < seconds * 1000; now++) {
      for (const f of filters) {
        for (let i = 0; i < attemptsPerMsPerInstance; i++) {
          const v = (await f.check({ request: publish(), caller })) as Verdict;
          if (v.allow) admitted++;
        }
      }
      // Each instance syncs on its own phase.
      if (now % SYNC_MS === 0) await filters[0].sync();
      if (now % SYNC_MS === SYNC_MS / 2) await filters[1].sync();
    }
    return admitted;
  }

  it("two saturated instances admit the tenant's rate x time + burst, within the stated bound", async () => {
    const seconds = 10;
    const admitted = await run(seconds, 2, 'shared');
    const ideal = LIMITS.eventsPerSecond * seconds + LIMITS.eventsPerSecond * LIMITS.burstSeconds;
    // rate x T + burst + instances x rate x 2 sync periods (tenant-quota-filter.ts).
    const bound = ideal + (2 * LIMITS.eventsPerSecond * 2 * SYNC_MS) / 1000;
    expect(admitted).toBeLessThanOrEqual(bound);
    expect(admitted).toBeGreaterThanOrEqual(0.9 * ideal);
  });

  it('each instance alone would admit the whole rate: without the shared usage the tenant gets twice its quota', async () => {
    const admitted = await run(10, 2, 'isolated');
    expect(admitted).toBeGreaterThan(2 * 200 * 10 * 0.95);
  });

  it('refuses over the rate with 429, Retry-After and the RateLimit fields', async () => {
    let now = 0;
    const f = new TenantQuotaFilter(
      noOverrides,
      usageTable(() => now),
      { instanceId: 'a', defaults: LIMITS, syncMs: SYNC_MS, refreshMs: 1000, clock: () => now },
    );
    filters = [f];
    for (let i = 0; i < 200; i++) expect(await f.check({ request: publish(), caller })).toMatchObject({ allow: true });
    const refused = await f.check({ request: publish(), caller });
    expect(refused).toMatchObject({
      allow: false,
      refusal: {
        code: 'QUOTA_EXCEEDED',
        reason: 'events_per_second',
        headers: { 'retry-after': '1', 'ratelimit-policy': '"events";q=200;w=1', ratelimit: '"events";r=0;t=1' },
      },
    });
    // A publish above the byte burst could never pass: 413 BATCH_EXCEEDS_BURST, not a 429, and nothing charged.
    now = 1000;
    const big = await f.check({ request: publish(2 * 1024 * 1024), caller });
    expect(big).toMatchObject({
      allow: false,
      refusal: {
        code: 'BATCH_EXCEEDS_BURST',
        reason: 'batch_exceeds_burst_bytes',
        headers: {},
        details: { quota: 'bytes_per_second', maxBatchBytes: 1024 * 1024, bytes: 2 * 1024 * 1024 },
      },
    });
    expect(await f.check({ request: publish(1024 * 1024), caller })).toMatchObject({ allow: true });
    expect(await f.check({ request: publish(1024), caller })).toMatchObject({
      allow: false,
      refusal: {
        reason: 'bytes_per_second',
        headers: { 'retry-after': '1', 'ratelimit-policy': '"bytes";q=1048576;qu="content-bytes";w=1' },
      },
    });
  });

  it("charges a batch per event, and refuses one above the tenant's burst 413 BATCH_EXCEEDS_BURST with the largest allowed, charging nothing", async () => {
    const now = 0;
    const f = new TenantQuotaFilter(
      noOverrides,
      usageTable(() => now),
      {
        instanceId: 'a',
        defaults: { ...LIMITS, eventsPerSecond: 5, burstSeconds: 2 },
        syncMs: SYNC_MS,
        refreshMs: 1000,
        clock: () => now,
      },
    );
    filters = [f];
    const batch = (events: number): GateRequest => ({ ...publish(), publish: { events, bytes: 100 } });
    const tooLarge = await f.check({ request: batch(500), caller });
    expect(tooLarge).toMatchObject({
      allow: false,
      refusal: {
        code: 'BATCH_EXCEEDS_BURST',
        reason: 'batch_exceeds_burst_events',
        details: { quota: 'events_per_second', maxBatchEvents: 10, events: 500 },
      },
    });
    expect(
      (tooLarge as { refusal: { headers: Record<string, string> } }).refusal.headers['retry-after'],
    ).toBeUndefined();
    // The refused batch took nothing: the whole burst is there, batch by batch, each event counted.
    expect(await f.check({ request: batch(10), caller })).toMatchObject({ allow: true });
    expect(await f.check({ request: batch(1), caller })).toMatchObject({
      allow: false,
      refusal: { code: 'QUOTA_EXCEEDED', reason: 'events_per_second' },
    });
  });

  it("gives a publish's charge back when the route refuses it after the gate, once", async () => {
    const now = 0;
    const f = new TenantQuotaFilter(
      noOverrides,
      usageTable(() => now),
      {
        instanceId: 'a',
        defaults: { ...LIMITS, eventsPerSecond: 5, burstSeconds: 1 },
        syncMs: SYNC_MS,
        refreshMs: 1000,
        clock: () => now,
      },
    );
    filters = [f];
    const batch: GateRequest = { ...publish(), publish: { events: 5, bytes: 100 } };
    const admitted = (await f.check({ request: batch, caller })) as Extract<Verdict, { allow: true }>;
    expect(admitted.allow).toBe(true);
    expect(await f.check({ request: batch, caller })).toMatchObject({ allow: false });
    admitted.refund!();
    admitted.refund!();
    expect(await f.check({ request: batch, caller })).toMatchObject({ allow: true });
    expect(await f.check({ request: publish(), caller })).toMatchObject({ allow: false });
  });

  it('counts stream connections runtime-wide, and gives one back on release', async () => {
    let now = 0;
    const clock = () => now;
    const table = usageTable(clock);
    const a = new TenantQuotaFilter(noOverrides, table, {
      instanceId: 'a',
      defaults: LIMITS,
      syncMs: SYNC_MS,
      refreshMs: 1000,
      clock,
    });
    const b = new TenantQuotaFilter(noOverrides, table, {
      instanceId: 'b',
      defaults: LIMITS,
      syncMs: SYNC_MS,
      refreshMs: 1000,
      clock,
    });
    filters = [a, b];
    const stream: GateRequest = {
      route: 'GET /subscriptions/:id/events',
      action: 'subscribe',
      headers: {},
      remoteAddress: '127.0.0.1',
      requestId: 'r',
      stream: true,
    };
    const held = [await a.check({ request: stream, caller }), await a.check({ request: stream, caller })] as Verdict[];
    expect(held.every((v) => v.allow)).toBe(true);
    now = 100;
    await a.sync();
    await b.sync();
    expect(await b.check({ request: stream, caller })).toMatchObject({ allow: true });
    expect(await b.check({ request: stream, caller })).toMatchObject({
      allow: false,
      refusal: {
        reason: 'stream_connections',
        headers: { 'ratelimit-policy': '"streams";q=3;qu="concurrent-requests"' },
      },
    });
    const first = held[0];
    if (first.allow) first.release?.();
    now = 200;
    await a.sync();
    await b.sync();
    expect(await b.check({ request: stream, caller })).toMatchObject({ allow: true });
  });

  it("refuses a subscription past the tenant's count", async () => {
    let count = 1;
    const source: TenantQuotaSource = {
      ...noOverrides,
      subscriptionCount: (tenant) => Promise.resolve(tenant === 'acme' ? count : 0),
    };
    const f = new TenantQuotaFilter(source, usageTable(Date.now), {
      instanceId: 'a',
      defaults: LIMITS,
      syncMs: SYNC_MS,
      refreshMs: 1000,
    });
    filters = [f];
    const create: GateRequest = {
      route: 'POST /subscriptions',
      action: 'subscribe',
      headers: {},
      remoteAddress: '127.0.0.1',
      requestId: 'r',
      createsSubscription: true,
    };
    expect(await f.check({ request: create, caller })).toMatchObject({ allow: true });
    count = 2;
    expect(await f.check({ request: create, caller })).toMatchObject({
      allow: false,
      refusal: { code: 'QUOTA_EXCEEDED', reason: 'subscriptions' },
    });
    expect(await f.check({ request: create, caller: { ...caller, tenant: 'other' } })).toMatchObject({ allow: true });
  });

  it("applies a tenant's own quota after its version moves", async () => {
    let version = 0;
    let overrides = {
      eventsPerSecond: null as number | null,
      bytesPerSecond: null,
      burstSeconds: null,
      streamConnections: null,
      subscriptions: null,
    };
    const source: TenantQuotaSource = {
      version: () => Promise.resolve(version),
      snapshot: () => Promise.resolve({ version, quotas: [{ tenant: 'acme', overrides }] }),
      subscriptionCount: () => Promise.resolve(0),
    };
    let now = 0;
    const f = new TenantQuotaFilter(
      source,
      usageTable(() => now),
      { instanceId: 'a', defaults: LIMITS, syncMs: SYNC_MS, refreshMs: 1000, clock: () => now },
    );
    filters = [f];
    expect(await f.check({ request: publish(), caller })).toMatchObject({ allow: true });
    overrides = { ...overrides, eventsPerSecond: 5 };
    version = 1;
    now = 1000;
    await f.sync();
    let admitted = 0;
    for (let i = 0; i < 50; i++) if (((await f.check({ request: publish(), caller })) as Verdict).allow) admitted++;
    expect(admitted).toBe(5);
  });
});
