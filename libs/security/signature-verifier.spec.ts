import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { ANONYMOUS, Caller } from './caller';
import type { GateRequest, Verdict } from './gate-filter';
import { signingKeyOf } from './publisher-secrets';
import { PublisherKeySource, ReplayLedger, SignatureVerifier } from './signature-verifier';

/** The replay ledger's contract, in memory: an id is claimed once until its expiry; purge drops expired ids. */
class MemoryLedger implements ReplayLedger {
  readonly rows = new Map<string, number>();
  constructor(private readonly now: () => number) {}
  async claim(tenant: string, principal: string, webhookId: string, expiresAt: Date): Promise<boolean> {
    const key = `${tenant}\u0000${principal}\u0000${webhookId}`;
    const expiry = this.rows.get(key);
    if (expiry !== undefined && expiry >= this.now()) return false;
    this.rows.set(key, expiresAt.getTime());
    return true;
  }
  async purge(limit: number): Promise<number> {
    let n = 0;
    for (const [key, expiry] of this.rows) {
      if (expiry < this.now() && n < limit) {
        this.rows.delete(key);
        n++;
      }
    }
    return n;
  }
}

/** Publisher secrets by `tenant/principal`, with a count of reads (the verifier's cache). */
class MemorySecrets implements PublisherKeySource {
  readonly secrets = new Map<string, string[]>();
  reads = 0;
  async keysOf(tenant: string, principal: string) {
    this.reads++;
    const secrets = this.secrets.get(`${tenant}/${principal}`) ?? [];
    return { count: secrets.length, keys: secrets.map(signingKeyOf) };
  }
}

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

describe('SignatureVerifier', () => {
  let clock: number;
  let secrets: MemorySecrets;
  let ledger: MemoryLedger;
  let verifier: SignatureVerifier;
  const publisher: Caller = { principal: 'orders-service', tenant: 'acme', scopes: ['publish'], via: 'jwt' };
  const current = newSecret();
  const next = newSecret();
  const body = Buffer.from('{"specversion":"1.0","id":"e-1","source":"/orders","type":"order.created"}');

  beforeEach(() => {
    clock = Date.parse('2026-12-01T08:00:00Z');
    secrets = new MemorySecrets();
    secrets.secrets.set('acme/orders-service', [current]);
    ledger = new MemoryLedger(() => clock);
    verifier = new SignatureVerifier(secrets, ledger, {
      toleranceSeconds: 300,
      cacheMs: 5000,
      purgeIntervalMs: 0,
      now: () => clock,
    });
  });

  /** Standard Webhooks headers made by the official library. */
  function signed(secret: string, id: string, at = new Date(clock), payload = body): Record<string, string> {
    return {
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign(id, at, payload),
    };
  }

  function publish(
    headers: Record<string, string>,
    payload: Buffer | null = body,
    caller = publisher,
  ): Promise<Verdict> {
    const request: GateRequest = {
      route: 'POST /events/publish',
      action: 'publish',
      topic: 'orders',
      headers,
      remoteAddress: '127.0.0.1',
      requestId: 'r-1',
      // null: a publish without a body (the route passes `body: undefined`).
      ...(payload ? { body: payload } : {}),
      publish: { events: 1, bytes: payload?.length ?? 0 },
    };
    return Promise.resolve(verifier.check({ request, caller }));
  }

  const reasonOf = (v: Verdict) => (v.allow ? 'allow' : v.refusal.reason);

  it.each<[string, () => Record<string, string>, string]>([
    ['a valid signature', () => signed(current, 'msg-valid'), 'allow'],
    ['a signature by another secret', () => signed(newSecret(), 'msg-other'), 'bad_signature'],
    [
      'a signature of another body',
      () => signed(current, 'msg-body', new Date(clock), Buffer.from('{}')),
      'bad_signature',
    ],
    [
      'a signature whose id was changed',
      () => ({ ...signed(current, 'msg-a'), 'webhook-id': 'msg-b' }),
      'bad_signature',
    ],
    [
      'a timestamp changed after signing',
      () => ({ ...signed(current, 'msg-ts'), 'webhook-timestamp': String(Math.floor(clock / 1000) - 1) }),
      'bad_signature',
    ],
    ['a timestamp 301 s old', () => signed(current, 'msg-old', new Date(clock - 301_000)), 'stale_timestamp'],
    ['a timestamp 301 s ahead', () => signed(current, 'msg-ahead', new Date(clock + 301_000)), 'stale_timestamp'],
    ['a timestamp 299 s old', () => signed(current, 'msg-299', new Date(clock - 299_000)), 'allow'],
    ['no signature headers', () => ({}), 'missing_signature'],
    [
      'no webhook-signature',
      () => ({ 'webhook-id': 'x', 'webhook-timestamp': String(Math.floor(clock / 1000)) }),
      'missing_signature',
    ],
    [
      'a timestamp in milliseconds text',
      () => ({ ...signed(current, 'msg-ms'), 'webhook-timestamp': 'yesterday' }),
      'malformed_signature',
    ],
    ['an id with a space', () => ({ ...signed(current, 'msg-sp'), 'webhook-id': 'a b' }), 'malformed_signature'],
    [
      'a v2 signature only',
      () => ({
        ...signed(current, 'msg-v2'),
        'webhook-signature': signed(current, 'msg-v2')['webhook-signature'].replace('v1,', 'v2,'),
      }),
      'bad_signature',
    ],
    [
      'a bad and a good signature',
      () => ({
        ...signed(current, 'msg-two'),
        'webhook-signature': `v1,${randomBytes(32).toString('base64')} ${signed(current, 'msg-two')['webhook-signature']}`,
      }),
      'allow',
    ],
  ])('%s', async (_, headers, expected) => {
    expect(reasonOf(await publish(headers()))).toBe(expected);
  });

  it('refuses a replayed id, and a replay cannot be told apart by a new timestamp either', async () => {
    expect(reasonOf(await publish(signed(current, 'msg-once')))).toBe('allow');
    expect(reasonOf(await publish(signed(current, 'msg-once')))).toBe('replayed');
    clock += 10_000;
    expect(reasonOf(await publish(signed(current, 'msg-once')))).toBe('replayed');
    // Another principal's id space is its own.
    secrets.secrets.set('acme/billing', [current]);
    expect(reasonOf(await publish(signed(current, 'msg-once'), body, { ...publisher, principal: 'billing' }))).toBe(
      'allow',
    );
  });

  it('records an id only once its signature is good: a forged request cannot burn the id', async () => {
    expect(reasonOf(await publish({ ...signed(newSecret(), 'msg-burn') }))).toBe('bad_signature');
    expect(ledger.rows.size).toBe(0);
    expect(reasonOf(await publish(signed(current, 'msg-burn')))).toBe('allow');
  });

  it('keeps an id until no request with it can pass the timestamp check; purge drops it after', async () => {
    expect(reasonOf(await publish(signed(current, 'msg-purge', new Date(clock + 290_000))))).toBe('allow');
    clock += 580_000; // the timestamp is now 290 s old: a replay still passes the timestamp check
    expect(reasonOf(await publish(signed(current, 'msg-purge', new Date(clock - 290_000))))).toBe('replayed');
    expect(await ledger.purge(100)).toBe(0);
    clock += 60_000 + 10_000 + 1;
    expect(await ledger.purge(100)).toBe(1);
  });

  it('accepts either of two active secrets (rotation), and picks a change up once the cache expires', async () => {
    secrets.secrets.set('acme/orders-service', [current, next]);
    clock += 5001;
    expect(reasonOf(await publish(signed(current, 'msg-r1')))).toBe('allow');
    expect(reasonOf(await publish(signed(next, 'msg-r2')))).toBe('allow');
    secrets.secrets.set('acme/orders-service', [next]);
    // Within the cache time the old secret still counts; after it, it does not.
    expect(reasonOf(await publish(signed(current, 'msg-r3')))).toBe('allow');
    clock += 5001;
    expect(reasonOf(await publish(signed(current, 'msg-r4')))).toBe('bad_signature');
    expect(reasonOf(await publish(signed(next, 'msg-r5')))).toBe('allow');
    expect(secrets.reads).toBe(2);
  });

  it('lets a principal without secrets through unsigned, and requests without a body', async () => {
    expect(reasonOf(await publish({}, body, ANONYMOUS))).toBe('allow');
    const subscribe: GateRequest = {
      route: 'POST /subscriptions',
      action: 'subscribe',
      headers: {},
      remoteAddress: '127.0.0.1',
      requestId: 'r-2',
    };
    expect(reasonOf(await verifier.check({ request: subscribe, caller: publisher }))).toBe('allow');
  });

  it('requires a signature of an empty publish too (a binary-mode event without data)', async () => {
    expect(reasonOf(await publish({}, null))).toBe('missing_signature');
    expect(reasonOf(await publish(signed(current, 'msg-empty', new Date(clock), Buffer.alloc(0)), null))).toBe('allow');
  });

  it('answers 401 with a challenge and a message that names no secret', async () => {
    const verdict = await publish(signed(newSecret(), 'msg-401'));
    expect(verdict.allow).toBe(false);
    if (verdict.allow) return;
    expect(verdict.refusal.code).toBe('UNAUTHENTICATED');
    expect(verdict.refusal.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(verdict.refusal.message).not.toContain(current);
  });
});
