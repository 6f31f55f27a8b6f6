import { randomInt, randomUUID } from 'node:crypto';
import type { Client } from 'pg';
import type { DataSource } from 'typeorm';
import type { EventMeshConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { attributesOf, CORRELATION_ATTRIBUTE, EventFrame, frameFromAttributes } from '@libs/frame';
import type { EventIngress, PublishRequest } from '@libs/ingress';
import { createLogger } from '@libs/logging';
import { createPostgresClient, PendingRequestStore } from '@libs/storage';
import type { RequestReplyView } from '@libs/metrics';

export { CORRELATION_ATTRIBUTE };
export const DEFAULT_REQUEST_TIMEOUT_MS = 30000;
export const MAX_REQUEST_TIMEOUT_MS = 300000;
const POLL_INTERVAL_MS = 1000;
const CLEANUP_INTERVAL_MS = 60000;
/**
 * The first key of the session advisory locks that say a holding process lives; the second is the process's
 * holder key, written on each of its pending rows.
 */
export const REPLY_HOLDER_LOCK_SPACE = 1_919_250_544;

export interface RequestReplyOptions {
  /** Most requests this process holds waiting at once; one more is refused (503 OVERLOADED). */
  maxPending: number;
  /**
   * Most requests of one tenant this process holds waiting at once; one more is refused (429
   * TOO_MANY_PENDING_REQUESTS), so one tenant cannot take every slot of `maxPending` from the others.
   */
  maxPendingPerTenant: number;
  /** The wait a refused requester is told (Retry-After). */
  retryAfterSeconds: number;
}

/** Waiting requests and their outcomes: what /health and /metrics show. */
export type RequestReplyStats = RequestReplyView;

/** Why a reply was not delivered (the `reason` of its 404 `REQUEST_NOT_PENDING`). */
export type UndeliveredReason = 'unknown' | 'expired' | 'already-replied' | 'requester-gone';

/**
 * Request-reply over the event plane. `request` records the waiting request in Postgres (which instance and
 * process hold it, until when), publishes the event with a correlation id, and holds the caller until a reply
 * arrives or its deadline passes. `reply`, on any instance, stores the reply on that record and wakes the holding
 * process with Postgres NOTIFY, only while the request is waiting and its holder lives; it says which. Replies
 * are never retried or dead-lettered: one that finds no request waiting is refused, dropped and counted.
 *
 * One deadline: it is set once, when the request is taken, before the row is written and the event published;
 * the in-process timer and the row's deadline both count from it (the row's from its INSERT, a few milliseconds
 * later). At its deadline the holder removes the row and answers with a reply stored until then, so a reply told
 * `delivered` is always answered, and one refused never is.
 *
 * Holder liveness: each process holds a session advisory lock (REPLY_HOLDER_LOCK_SPACE, its holder key) on its
 * reply connection, and writes the key on its rows. Postgres releases the lock when the session ends, so a reply
 * to a process that died is refused (`requester-gone`) instead of stored for nobody. While the reply connection
 * is being reopened, replies to that process are refused the same way.
 */
export class RequestReplyService {
  private readonly log = createLogger('RequestReply');
  private readonly waiters = new Map<string, (reply: EventFrame) => void>();
  /** Requests waiting in this process, by tenant (a tenant with none has no entry). */
  private readonly pendingByTenant = new Map<string, number>();
  private listener?: Client;
  private poller?: NodeJS.Timeout;
  private pinger?: NodeJS.Timeout;
  private sweptAt = 0;
  private closed = false;
  /** This process's liveness key (see the class comment); held on the reply connection. */
  private holderKey = randomInt(1, 2 ** 31 - 1);
  readonly stats: RequestReplyStats = {
    pending: 0,
    replied: 0,
    timedOut: 0,
    lateReplies: 0,
    requesterGone: 0,
    refused: 0,
    refusedForTenant: 0,
  };

  private readonly store: PendingRequestStore;

  constructor(
    db: DataSource,
    private readonly ingress: EventIngress,
    private readonly pg: EventMeshConfig['postgres'],
    private readonly instanceId: string,
    private readonly options: RequestReplyOptions,
  ) {
    this.store = new PendingRequestStore(db, REPLY_HOLDER_LOCK_SPACE);
  }

  /**
   * Opens the LISTEN connection (one per instance) and keeps it open: when it drops it is reopened with backoff.
   * NOTIFY only makes replies fast; a poll every second of the replies to this instance's waiting requests
   * catches any notification lost while the connection was down.
   */
  async start(): Promise<void> {
    // A key another live process holds already (about 1 in 2^31 per process) is replaced at start, never later:
    // rows carry it.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.listen();
        break;
      } catch (e) {
        if (!(e instanceof HolderKeyTaken) || attempt >= 5) throw e;
        this.holderKey = randomInt(1, 2 ** 31 - 1);
      }
    }
    this.poller = setInterval(() => void this.poll(), POLL_INTERVAL_MS);
    // An idle LISTEN connection whose link went dead (no RST) reports nothing: a ping four times per query timeout
    // runs into the query's deadline there, which drops the connection, and the listener reconnects.
    if (this.pg.queryTimeoutMs > 0)
      this.pinger = setInterval(() => void this.ping(), Math.max(1000, Math.floor(this.pg.queryTimeoutMs / 4)));
  }

  private async ping(): Promise<void> {
    if (this.listener) await this.store.ping(this.listener).catch(() => undefined);
  }

  private async listen(): Promise<void> {
    const client = createPostgresClient(this.pg, `eventmesh-${this.instanceId}-replies`);
    client.on('notification', (n) => void this.deliver([n.payload ?? '']));
    client.on('error', (e) => {
      if (this.listener !== client) return;
      this.listener = undefined;
      this.log.warn({ error: e.message }, 'reply listener lost its connection; reconnecting');
      void client.end().catch(() => undefined);
      void this.reconnect();
    });
    try {
      await client.connect();
      // After a dropped connection the old session may still hold the key until Postgres notices it is gone:
      // the reconnect loop tries again.
      // The server ends this session when it hears nothing for a query timeout (pings keep a live one busy), so
      // a session whose client vanished behind a dead link lets the holder key go and the reconnect can take it.
      if (!(await this.store.listenOn(client, this.holderKey, this.pg.queryTimeoutMs)))
        throw new HolderKeyTaken(this.holderKey);
    } catch (e) {
      await client.end().catch(() => undefined);
      throw e;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.listener = client;
  }

  private async reconnect(): Promise<void> {
    for (let attempt = 0; !this.closed && !this.listener; attempt++) {
      await new Promise((r) => setTimeout(r, Math.min(10000, 250 * 2 ** attempt)));
      if (this.closed) return;
      try {
        await this.listen();
        this.log.info('reply listener reconnected');
      } catch (e) {
        this.log.warn({ error: (e as Error).message, attempt }, 'reply listener could not reconnect yet');
      }
    }
    await this.poll();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.poller);
    clearInterval(this.pinger);
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
  }

  /** Whether replies arrive by notification right now (else only by the one-second poll). */
  get listening(): boolean {
    return this.listener !== undefined;
  }

  /** Publishes a request of `tenant` (the caller's) and waits for its reply; only a reply of that tenant answers it. */
  async request(
    topic: string | undefined,
    publish: PublishRequest,
    timeoutMs: number,
    tenant: string,
  ): Promise<EventFrame> {
    if (this.stats.pending >= this.options.maxPending) {
      this.stats.refused++;
      throw new EventMeshError(
        ErrorCode.Overloaded,
        `this gateway process holds ${this.stats.pending} requests waiting for replies, its most; nothing was published, ask again later`,
        {
          limit: 'pendingRequests',
          maxPending: this.options.maxPending,
          retryAfterSeconds: this.options.retryAfterSeconds,
        },
        true,
      );
    }
    // The tenant's own cap, after the process's: a process at its cap is everybody's 503, a tenant at its cap is its
    // own 429 while the others go on.
    const tenantPending = this.pendingByTenant.get(tenant) ?? 0;
    if (tenantPending >= this.options.maxPendingPerTenant) {
      this.stats.refusedForTenant++;
      throw new EventMeshError(
        ErrorCode.TooManyPendingRequests,
        `this tenant has ${tenantPending} requests waiting for replies in this gateway process, its most; nothing was published, ask again when one is answered`,
        {
          limit: 'tenantPendingRequests',
          maxPendingPerTenant: this.options.maxPendingPerTenant,
          retryAfterSeconds: this.options.retryAfterSeconds,
        },
        true,
      );
    }
    this.stats.pending++;
    this.pendingByTenant.set(tenant, tenantPending + 1);
    const correlationId = randomUUID();
    // The one deadline, set now: the timer runs from here, and the row's deadline from its INSERT just below.
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), timeoutMs);
    });
    const replied = new Promise<EventFrame>((resolve) => this.waiters.set(correlationId, resolve));
    try {
      await this.store.add(correlationId, this.instanceId, timeoutMs, this.holderKey, tenant);
      // The publish waits for Kafka's acknowledgement (bounded by the producer); the deadline bounds it too.
      let publishError: unknown;
      const published = this.ingress
        .publish(topic, tenant, publish, (frame) => {
          frame.extensions[CORRELATION_ATTRIBUTE] = correlationId;
        })
        .then(
          () => true,
          (e: unknown) => {
            publishError = e;
            return false;
          },
        );
      const outcome = await Promise.race([published, deadline]);
      // Whatever ended the wait, a reply stored until now (its replier was told "delivered") is the answer.
      const reply =
        (outcome === true ? await Promise.race([replied, deadline]) : undefined) ?? (await this.take(correlationId));
      if (reply) {
        this.stats.replied++;
        return reply;
      }
      if (outcome === false) throw publishError;
      this.stats.timedOut++;
      throw new EventMeshError(ErrorCode.RequestTimeout, `no reply within ${timeoutMs} ms`, {
        correlationId,
        timeoutMs,
      });
    } finally {
      clearTimeout(timer);
      this.waiters.delete(correlationId);
      this.stats.pending--;
      const left = (this.pendingByTenant.get(tenant) ?? 1) - 1;
      if (left > 0) this.pendingByTenant.set(tenant, left);
      else this.pendingByTenant.delete(tenant);
      await this.store.remove(correlationId).catch(() => undefined);
    }
  }

  /**
   * At the deadline (or a failed publish), the record is removed; a reply that was stored just before (its
   * replier was told "delivered") comes back with it and is answered, not thrown away.
   */
  private async take(correlationId: string): Promise<EventFrame | undefined> {
    const reply = await this.store.take(correlationId);
    return reply ? frameFromAttributes(reply.attributes, reply.data) : undefined;
  }

  /**
   * Hands a reply to the request waiting for it, on whichever instance, and says so only when it did: the request
   * is pending, of the replier's `tenant`, before its deadline, not replied yet, and its holding process lives.
   * Otherwise it is refused (404 `REQUEST_NOT_PENDING`, `delivered: false`, with the reason) and nothing is stored;
   * a request of another tenant is `unknown`, exactly like one that never existed.
   */
  async reply(frame: EventFrame, tenant: string): Promise<{ correlationId: string; delivered: true }> {
    const correlationId = frame.extensions[CORRELATION_ATTRIBUTE];
    if (typeof correlationId !== 'string' || correlationId === '') {
      throw new EventMeshError(
        ErrorCode.InvalidCloudEvent,
        `a reply needs the "${CORRELATION_ATTRIBUTE}" extension attribute`,
        {
          attribute: CORRELATION_ATTRIBUTE,
        },
      );
    }
    // Checking, storing the reply and waking the holder are one statement: all happen, or none. Postgres text
    // holds no NUL: a correlation id with one names no request (and is not sent to Postgres).
    const row = correlationId.includes('\0')
      ? undefined
      : await this.store.storeReply(correlationId, tenant, {
          attributes: attributesOf(frame),
          data: frame.data ?? null,
        });
    if (row?.delivered === 1) return { correlationId, delivered: true };
    const reason: UndeliveredReason = !row
      ? 'unknown'
      : !row.open
        ? 'expired'
        : row.replied
          ? 'already-replied'
          : 'requester-gone';
    this.stats.lateReplies++;
    if (reason === 'requester-gone') this.stats.requesterGone++;
    this.log.info({ correlationId, reason }, 'reply found no request waiting; dropped');
    throw new EventMeshError(
      ErrorCode.RequestNotPending,
      `no request is waiting for correlation id ${correlationId} (${reason})`,
      {
        correlationId,
        reason,
        delivered: false,
      },
    );
  }

  /** Hands stored replies to the requests of this instance that wait for them. Never throws. */
  private async deliver(correlationIds: string[]): Promise<void> {
    const mine = correlationIds.filter((id) => this.waiters.has(id));
    if (mine.length === 0) return;
    try {
      for (const reply of await this.store.repliesTo(mine))
        this.waiters.get(reply.correlationId)?.(frameFromAttributes(reply.attributes, reply.data));
    } catch (e) {
      this.log.warn({ error: (e as Error).message }, 'could not read stored replies; the next poll tries again');
    }
  }

  private async poll(): Promise<void> {
    if (this.waiters.size > 0) await this.deliver([...this.waiters.keys()]);
    // Records of requests whose holder died stay unmatched (their deadline passed); cleared now and then, off
    // the request path.
    if (Date.now() - this.sweptAt > CLEANUP_INTERVAL_MS) {
      this.sweptAt = Date.now();
      await this.store.sweep().catch(() => undefined);
    }
  }
}

class HolderKeyTaken extends Error {
  constructor(key: number) {
    super(`the reply holder key ${key} is held by another session`);
  }
}
