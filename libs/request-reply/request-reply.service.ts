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
  private closed = false;
  readonly stats: RequestReplyStats = { pending: 0, replied: 0, timedOut: 0, lateReplies: 0 };

  constructor(
    private readonly db: DataSource,
    private readonly ingress: EventIngress,
    private readonly pg: EventMeshConfig['postgres'],
    private readonly instanceId: string,
  ) {}

  /** Opens the LISTEN connection (one per instance); reconnects if it drops. */
  async start(): Promise<void> {
    const client = new Client({ ...this.pg, user: this.pg.user, application_name: `eventmesh-${this.instanceId}-replies` });
    client.on('notification', (n) => void this.onNotification(n.payload ?? ''));
    client.on('error', (e) => {
      this.log.warn({ error: e.message }, 'reply listener lost its connection; reconnecting');
      this.listener = undefined;
      if (!this.closed) setTimeout(() => void this.start().catch(() => undefined), 1000);
    });
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    this.listener = client;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.listener?.end().catch(() => undefined);
  }

  async request(topic: string | undefined, publish: PublishRequest, timeoutMs: number): Promise<EventFrame> {
    const correlationId = randomUUID();
    const deadline = new Date(Date.now() + timeoutMs);
    await this.db.query(
      `INSERT INTO pending_requests (correlation_id, instance_id, deadline) VALUES ($1, $2, $3)`,
      [correlationId, this.instanceId, deadline],
    );
    // Records of requests whose holder died stay unmatched (their deadline passed); clear them now and then.
    void this.db.query(`DELETE FROM pending_requests WHERE deadline < now() - interval '1 minute'`).catch(() => undefined);
    const replied = new Promise<EventFrame>((resolve) => this.waiters.set(correlationId, resolve));
    this.stats.pending++;
    let timer: NodeJS.Timeout | undefined;
    try {
      await this.ingress.publish(topic, publish, (frame) => {
        frame.extensions[CORRELATION_ATTRIBUTE] = correlationId;
      });
      const timedOut = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), Math.max(0, deadline.getTime() - Date.now()));
      });
      const reply = await Promise.race([replied, timedOut]);
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

  /** Hands a reply to the request waiting for it, on whichever instance; refuses it if none is waiting. */
  async reply(frame: EventFrame): Promise<{ correlationId: string }> {
    const correlationId = frame.extensions[CORRELATION_ATTRIBUTE];
    if (typeof correlationId !== 'string' || correlationId === '') {
      throw new EventMeshError(ErrorCode.InvalidCloudEvent, `a reply needs the "${CORRELATION_ATTRIBUTE}" extension attribute`, {
        attribute: CORRELATION_ATTRIBUTE,
      });
    }
    const result: unknown[] = await this.db.query(
      `UPDATE pending_requests SET reply_attributes = $2, reply_data = $3
        WHERE correlation_id = $1 AND deadline > now() AND reply_attributes IS NULL RETURNING instance_id`,
      [correlationId, attributesOf(frame), frame.data ?? null],
    );
    if (Number(result[1] ?? 0) === 0) {
      this.stats.lateReplies++;
      this.log.info({ correlationId }, 'reply found no request waiting; dropped');
      throw new EventMeshError(ErrorCode.RequestNotPending, `no request is waiting for correlation id ${correlationId}`, {
        correlationId,
      });
    }
    await this.db.query(`SELECT pg_notify($1, $2)`, [CHANNEL, correlationId]);
    return { correlationId };
  }

  private async onNotification(correlationId: string): Promise<void> {
    const waiter = this.waiters.get(correlationId);
    if (!waiter) return;
    const rows: { reply_attributes: Record<string, unknown>; reply_data: Buffer | null }[] = await this.db.query(
      `SELECT reply_attributes, reply_data FROM pending_requests WHERE correlation_id = $1 AND reply_attributes IS NOT NULL`,
      [correlationId],
    );
    if (rows.length === 1) waiter(frameFromAttributes(rows[0].reply_attributes, rows[0].reply_data));
  }
}
