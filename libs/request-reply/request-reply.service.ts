import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import type { EventMeshConfig } from '../config';
import { ErrorCode, EventMeshError } from '../errors';
import { attributesOf, EventFrame, frameFromAttributes } from '../frame';
import type { EventIngress, PublishRequest } from '../ingress';
import { createLogger } from '../logging';

/** The extension attribute that ties a reply to its request. */
export const CORRELATION_ATTRIBUTE = 'correlationid';
const CHANNEL = 'eventmesh_replies';
export const DEFAULT_REQUEST_TIMEOUT_MS = 30000;
export const MAX_REQUEST_TIMEOUT_MS = 300000;
const POLL_INTERVAL_MS = 1000;
const CLEANUP_INTERVAL_MS = 60000;

export interface RequestReplyStats {
  pending: number;
  replied: number;
  timedOut: number;
  /** Replies that found no request waiting (too late, or an unknown correlation id), dropped. */
  lateReplies: number;
}

/**
 * Request-reply over the event plane. `request` publishes the event with a correlation id, records the waiting
 * request in Postgres (which instance holds it, until when) and holds the caller until a reply arrives or the
 * timeout passes. `reply`, on any instance, stores the reply on that record and wakes the holding instance with
 * Postgres NOTIFY. Replies are never retried or dead-lettered: one that finds no request waiting is dropped and
 * counted.
 */
export class RequestReplyService {
  private readonly log = createLogger('RequestReply');
  private readonly waiters = new Map<string, (reply: EventFrame) => void>();
  private listener?: Client;
  private poller?: NodeJS.Timeout;
  private sweptAt = 0;
  private closed = false;
  readonly stats: RequestReplyStats = { pending: 0, replied: 0, timedOut: 0, lateReplies: 0 };

  constructor(
    private readonly db: DataSource,
    private readonly ingress: EventIngress,
    private readonly pg: EventMeshConfig['postgres'],
    private readonly instanceId: string,
  ) {}

  /**
   * Opens the LISTEN connection (one per instance) and keeps it open: when it drops it is reopened with backoff.
   * NOTIFY only makes replies fast; a poll every second of the replies to this instance's waiting requests
   * catches any notification lost while the connection was down.
   */
  async start(): Promise<void> {
    await this.listen();
    this.poller = setInterval(() => void this.poll(), POLL_INTERVAL_MS);
  }

  private async listen(): Promise<void> {
    const client = new Client({ ...this.pg, application_name: `eventmesh-${this.instanceId}-replies` });
    client.on('notification', (n) => void this.deliver([n.payload ?? '']));
    client.on('error', (e) => {
      if (this.listener !== client) return;
      this.listener = undefined;
      this.log.warn({ error: e.message }, 'reply listener lost its connection; reconnecting');
      void client.end().catch(() => undefined);
      void this.reconnect();
    });
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
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
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
  }

  /** Whether replies arrive by notification right now (else only by the one-second poll). */
  get listening(): boolean {
    return this.listener !== undefined;
  }

  async request(topic: string | undefined, publish: PublishRequest, timeoutMs: number): Promise<EventFrame> {
    const correlationId = randomUUID();
    // The deadline is the database's clock, the one the reply's UPDATE compares against.
    await this.db.query(
      `INSERT INTO pending_requests (correlation_id, instance_id, deadline)
       VALUES ($1, $2, now() + $3 * interval '1 millisecond')`,
      [correlationId, this.instanceId, timeoutMs],
    );
    const replied = new Promise<EventFrame>((resolve) => this.waiters.set(correlationId, resolve));
    this.stats.pending++;
    let timer: NodeJS.Timeout | undefined;
    try {
      await this.ingress.publish(topic, publish, (frame) => {
        frame.extensions[CORRELATION_ATTRIBUTE] = correlationId;
      });
      const timedOut = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs);
      });
      const reply = (await Promise.race([replied, timedOut])) ?? (await this.take(correlationId));
      if (reply) {
        this.stats.replied++;
        return reply;
      }
      this.stats.timedOut++;
      throw new EventMeshError(ErrorCode.RequestTimeout, `no reply within ${timeoutMs} ms`, { correlationId, timeoutMs });
    } finally {
      clearTimeout(timer);
      this.waiters.delete(correlationId);
      this.stats.pending--;
      await this.db.query(`DELETE FROM pending_requests WHERE correlation_id = $1`, [correlationId]).catch(() => undefined);
    }
  }

  /**
   * At the timeout, the record is removed; a reply that was stored just before (its replier was told
   * "delivered") comes back with it and is answered, not thrown away.
   */
  private async take(correlationId: string): Promise<EventFrame | undefined> {
    const result: unknown[] = await this.db.query(
      `DELETE FROM pending_requests WHERE correlation_id = $1 RETURNING reply_attributes, reply_data`,
      [correlationId],
    );
    const rows = (result[0] ?? []) as { reply_attributes: Record<string, unknown> | null; reply_data: Buffer | null }[];
    const row = rows[0];
    return row?.reply_attributes ? frameFromAttributes(row.reply_attributes, row.reply_data) : undefined;
  }

  /** Hands a reply to the request waiting for it, on whichever instance; refuses it if none is waiting. */
  async reply(frame: EventFrame): Promise<{ correlationId: string }> {
    const correlationId = frame.extensions[CORRELATION_ATTRIBUTE];
    if (typeof correlationId !== 'string' || correlationId === '') {
      throw new EventMeshError(ErrorCode.InvalidCloudEvent, `a reply needs the "${CORRELATION_ATTRIBUTE}" extension attribute`, {
        attribute: CORRELATION_ATTRIBUTE,
      });
    }
    // Storing the reply and waking the holder are one statement: both happen, or neither.
    const rows: unknown[] = await this.db.query(
      `WITH stored AS (
         UPDATE pending_requests SET reply_attributes = $2, reply_data = $3
          WHERE correlation_id = $1 AND deadline > now() AND reply_attributes IS NULL
          RETURNING correlation_id)
       SELECT pg_notify('${CHANNEL}', correlation_id) FROM stored`,
      [correlationId, attributesOf(frame), frame.data ?? null],
    );
    if (rows.length === 0) {
      this.stats.lateReplies++;
      this.log.info({ correlationId }, 'reply found no request waiting; dropped');
      throw new EventMeshError(ErrorCode.RequestNotPending, `no request is waiting for correlation id ${correlationId}`, {
        correlationId,
      });
    }
    return { correlationId };
  }

  /** Hands stored replies to the requests of this instance that wait for them. Never throws. */
  private async deliver(correlationIds: string[]): Promise<void> {
    const mine = correlationIds.filter((id) => this.waiters.has(id));
    if (mine.length === 0) return;
    try {
      const rows: { correlation_id: string; reply_attributes: Record<string, unknown>; reply_data: Buffer | null }[] =
        await this.db.query(
          `SELECT correlation_id, reply_attributes, reply_data FROM pending_requests
            WHERE correlation_id = ANY($1) AND reply_attributes IS NOT NULL`,
          [mine],
        );
      for (const row of rows) this.waiters.get(row.correlation_id)?.(frameFromAttributes(row.reply_attributes, row.reply_data));
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
      await this.db.query(`DELETE FROM pending_requests WHERE deadline < now() - interval '1 minute'`).catch(() => undefined);
    }
  }
}
