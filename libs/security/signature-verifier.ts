import { createHmac, timingSafeEqual } from 'node:crypto';
import { ErrorCode } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { SignatureReplayStore } from '@libs/storage';
import { ALLOW, GateContext, GateFilter, GateRefusal, Verdict } from './gate-filter';

/** Where the verifier finds a principal's HMAC keys (PublisherSecretStore). `count` includes secrets that did not open. */
export interface PublisherKeySource {
  keysOf(tenant: string, principal: string): Promise<{ count: number; keys: Buffer[] }>;
}

/**
 * The record of `webhook-id`s already used, shared by every instance (SignatureReplayLedger). `claim` records an
 * id and answers true, or answers false when the id is already recorded and not yet expired (a replay).
 */
export interface ReplayLedger {
  claim(tenant: string, principal: string, webhookId: string, expiresAt: Date): Promise<boolean>;
  /** Deletes up to `limit` expired ids; answers how many it deleted. */
  purge(limit: number): Promise<number>;
}

export interface SignatureVerifierOptions {
  /** EVENTMESH_SECURITY_GATE_SIGNATURE_TOLERANCE_SECONDS: how far a `webhook-timestamp` may be from now, either way. */
  toleranceSeconds: number;
  /** How long a principal's keys are remembered: a rotation reaches every instance within this. */
  cacheMs?: number;
  /** How often expired replay ids are purged, one small batch per tick (sooner while batches come back full). */
  purgeIntervalMs?: number;
  purgeBatch?: number;
  now?: () => number;
}

/** Most `v1,` signatures looked at in one header (a rotating publisher sends two). */
const MAX_SIGNATURES = 8;
/** Longest `webhook-id` accepted; the id is a key of the replay table. */
const MAX_ID_CHARS = 256;
/** Kept past the tolerance, so instance clocks that disagree a little cannot reopen a replay window. */
const CLOCK_MARGIN_SECONDS = 60;
const CACHE_MAX_ENTRIES = 10_000;

/**
 * The SignatureVerifier gate filter (docs/security.md): a principal that registered publisher secrets
 * (`POST /admin/publishers/{principal}/secrets`) must sign the body of each publish, request and reply with the
 * Standard Webhooks scheme: `webhook-id`, `webhook-timestamp` (within the tolerance, either way) and
 * `webhook-signature` (`v1,<base64 HMAC-SHA256 of id.timestamp.body>`, several space-separated allowed), which
 * must match ANY of its secrets (two during a rotation). A `webhook-id` is accepted once per principal on the
 * whole runtime (the replay ledger in Postgres), recorded only once the signature is good, so nobody can burn
 * another's ids. A principal without secrets passes unsigned: signing is per publisher, opt-in. Requests without
 * a body (subscriptions, streams, admin) pass. The signature covers the body only (the Standard Webhooks scheme):
 * not the topic query parameter nor binary-mode `ce-*` headers.
 */
export class SignatureVerifier implements GateFilter {
  readonly name = 'signature' as const;
  private readonly log = createLogger('SignatureVerifier');
  private readonly cache = new Map<string, { until: number; keys: Promise<{ count: number; keys: Buffer[] }> }>();
  private readonly cacheMs: number;
  private readonly now: () => number;
  private purgeTimer?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly secrets: PublisherKeySource,
    private readonly replays: ReplayLedger,
    private readonly options: SignatureVerifierOptions,
  ) {
    this.cacheMs = options.cacheMs ?? 5000;
    this.now = options.now ?? Date.now;
    if (options.purgeIntervalMs !== 0) this.schedulePurge(options.purgeIntervalMs ?? 30_000);
  }

  async check({ request, caller }: GateContext): Promise<Verdict> {
    if (request.body === undefined && request.publish === undefined) return ALLOW;
    const { count, keys } = await this.keysOf(caller.tenant, caller.principal);
    if (count === 0) return ALLOW;
    const id = header(request.headers, 'webhook-id');
    const timestamp = header(request.headers, 'webhook-timestamp');
    const signatures = header(request.headers, 'webhook-signature');
    if (id === undefined || timestamp === undefined || signatures === undefined) {
      return refuse(
        'missing_signature',
        'this publisher signs its requests: webhook-id, webhook-timestamp and webhook-signature are required (Standard Webhooks)',
      );
    }
    if (id.length === 0 || id.length > MAX_ID_CHARS || /[^\x21-\x7e]/.test(id)) {
      return refuse('malformed_signature', `webhook-id: 1 to ${MAX_ID_CHARS} printable characters without spaces`);
    }
    if (!/^\d{1,12}$/.test(timestamp))
      return refuse('malformed_signature', 'webhook-timestamp: seconds since the epoch');
    const seconds = Number(timestamp);
    const nowSeconds = Math.floor(this.now() / 1000);
    if (Math.abs(nowSeconds - seconds) > this.options.toleranceSeconds) {
      return refuse(
        'stale_timestamp',
        `webhook-timestamp is more than ${this.options.toleranceSeconds} s from the gateway's clock`,
      );
    }
    if (!matches(keys, id, timestamp, request.body ?? EMPTY, signatures)) {
      return refuse('bad_signature', 'webhook-signature matches no secret of this publisher');
    }
    const expiresAt = new Date((seconds + this.options.toleranceSeconds + CLOCK_MARGIN_SECONDS) * 1000);
    if (!(await this.replays.claim(caller.tenant, caller.principal, id, expiresAt))) {
      return refuse('replayed', 'this webhook-id was already used; sign each request with a new one');
    }
    return ALLOW;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.purgeTimer);
  }

  /** The principal's keys, remembered for `cacheMs` (a failed read is not remembered). */
  private keysOf(tenant: string, principal: string): Promise<{ count: number; keys: Buffer[] }> {
    const key = `${tenant}\u0000${principal}`;
    const now = this.now();
    const cached = this.cache.get(key);
    if (cached && cached.until > now) return cached.keys;
    if (cached) this.cache.delete(key);
    if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
    const keys = this.secrets.keysOf(tenant, principal);
    this.cache.set(key, { until: now + this.cacheMs, keys });
    keys.catch(() => this.cache.get(key)?.keys === keys && this.cache.delete(key));
    return keys;
  }

  private schedulePurge(intervalMs: number): void {
    const batch = this.options.purgeBatch ?? 500;
    const tick = async () => {
      let deleted = 0;
      try {
        deleted = await this.replays.purge(batch);
      } catch (e) {
        this.log.warn({ error: (e as Error).message }, 'replay ids could not be purged; trying again later');
      }
      if (this.closed) return;
      // A full batch: more are waiting; take the next one soon rather than in a whole interval.
      this.purgeTimer = setTimeout(() => void tick(), deleted >= batch ? Math.min(1000, intervalMs) : intervalMs);
      this.purgeTimer.unref();
    };
    this.purgeTimer = setTimeout(() => void tick(), intervalMs);
    this.purgeTimer.unref();
  }
}

const EMPTY = Buffer.alloc(0);

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function refuse(reason: string, message: string): Verdict {
  return {
    allow: false,
    refusal: new GateRefusal(ErrorCode.Unauthenticated, message, reason, {
      'www-authenticate': 'Bearer error="invalid_token"',
    }),
  };
}

/** True when one of the `v1,` signatures is the HMAC of `id.timestamp.body` under one of the keys (constant time). */
export function matches(
  keys: readonly Buffer[],
  id: string,
  timestamp: string,
  body: Buffer,
  signatures: string,
): boolean {
  const offered = signatures
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .slice(0, MAX_SIGNATURES)
    .map((s) => Buffer.from(s.slice(3), 'base64'))
    .filter((b) => b.length === 32);
  let matched = false;
  for (const key of keys) {
    const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
    // Every pair is compared, so the time taken says nothing of which one matched.
    for (const signature of offered) matched = timingSafeEqual(expected, signature) || matched;
  }
  return matched;
}

/** The replay ledger in Postgres (`signature_replays`, libs/storage/security/signature-replay-store.ts). */
export class SignatureReplayLedger extends SignatureReplayStore implements ReplayLedger {}
