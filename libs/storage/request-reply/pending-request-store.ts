import type { Client } from 'pg';
import type { DataSource } from 'typeorm';

/** The NOTIFY channel that wakes the process holding a request when its reply is stored. */
const CHANNEL = 'eventmesh_replies';

/** A reply as stored on its request's row: the frame's attributes and its data. */
export interface StoredReply {
  attributes: Record<string, unknown>;
  data: Buffer | null;
}

/** What storing a reply found: the request's state, and whether the reply was stored (and its holder woken). */
export interface ReplyOutcome {
  open: boolean;
  replied: boolean;
  live: boolean;
  delivered: number;
}

/**
 * The `pending_requests` table and the reply connection's session (libs/request-reply/request-reply.service.ts):
 * a waiting request's row, the reply stored on it, and the NOTIFY that wakes its holder. A holder's liveness is a
 * session advisory lock (`lockSpace`, its holder key) on its reply connection, whose key its rows carry.
 */
export class PendingRequestStore {
  constructor(
    private readonly db: DataSource,
    private readonly lockSpace: number,
  ) {}

  /** Records a waiting request: its holder (instance, holder key), its tenant, and its deadline `timeoutMs` from now. */
  async add(
    correlationId: string,
    instanceId: string,
    timeoutMs: number,
    holderKey: number,
    tenant: string,
  ): Promise<void> {
    await this.db.query(
      `INSERT INTO pending_requests (correlation_id, instance_id, deadline, holder_key, tenant)
         VALUES ($1, $2, now() + $3 * interval '1 millisecond', $4, $5)`,
      [correlationId, instanceId, timeoutMs, holderKey, tenant],
    );
  }

  async remove(correlationId: string): Promise<void> {
    await this.db.query(`DELETE FROM pending_requests WHERE correlation_id = $1`, [correlationId]);
  }

  /** Removes the request's row; the reply stored on it, if any. */
  async take(correlationId: string): Promise<StoredReply | undefined> {
    const result: unknown[] = await this.db.query(
      `DELETE FROM pending_requests WHERE correlation_id = $1 RETURNING reply_attributes, reply_data`,
      [correlationId],
    );
    const rows = (result[0] ?? []) as { reply_attributes: Record<string, unknown> | null; reply_data: Buffer | null }[];
    const row = rows[0];
    return row?.reply_attributes ? { attributes: row.reply_attributes, data: row.reply_data } : undefined;
  }

  /**
   * Checks the tenant's request, stores the reply on it and wakes its holder, in one statement: all happen, or
   * none. Undefined when the tenant has no such request.
   */
  async storeReply(correlationId: string, tenant: string, reply: StoredReply): Promise<ReplyOutcome | undefined> {
    const rows: ReplyOutcome[] = await this.db.query(
      `WITH target AS (
         SELECT correlation_id, deadline > now() AS open, reply_attributes IS NOT NULL AS replied,
                (holder_key IS NULL OR EXISTS (
                   SELECT 1 FROM pg_locks l
                    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                      AND l.classid = $4::integer::oid AND l.objid = holder_key::oid)) AS live
           FROM pending_requests WHERE correlation_id = $1 AND tenant = $5 FOR UPDATE),
       stored AS (
         UPDATE pending_requests p SET reply_attributes = $2, reply_data = $3
           FROM target t
          WHERE p.correlation_id = t.correlation_id AND t.open AND NOT t.replied AND t.live
            AND p.deadline > now() AND p.reply_attributes IS NULL
          RETURNING p.correlation_id),
       notified AS (SELECT pg_notify('${CHANNEL}', correlation_id) FROM stored)
       SELECT t.open, t.replied, t.live, (SELECT count(*)::integer FROM notified) AS delivered FROM target t`,
      [correlationId, reply.attributes, reply.data, this.lockSpace, tenant],
    );
    return rows[0];
  }

  /** The replies stored for the requests of `ids`. */
  async repliesTo(ids: string[]): Promise<(StoredReply & { correlationId: string })[]> {
    const rows: { correlation_id: string; reply_attributes: Record<string, unknown>; reply_data: Buffer | null }[] =
      await this.db.query(
        `SELECT correlation_id, reply_attributes, reply_data FROM pending_requests
            WHERE correlation_id = ANY($1) AND reply_attributes IS NOT NULL`,
        [ids],
      );
    return rows.map((r) => ({ correlationId: r.correlation_id, attributes: r.reply_attributes, data: r.reply_data }));
  }

  /** Deletes the rows a minute past their deadline (their holders are gone). */
  async sweep(): Promise<void> {
    await this.db.query(`DELETE FROM pending_requests WHERE deadline < now() - interval '1 minute'`);
  }

  /**
   * Makes `client` (a connection of its own) the reply connection of the process holding `holderKey`: takes the
   * key's session lock (false, nothing else done, when another session holds it), ends the session when it is idle
   * `idleTimeoutMs` (0: never), and listens on the replies' channel.
   */
  async listenOn(client: Client, holderKey: number, idleTimeoutMs: number): Promise<boolean> {
    const locked: { rows: { locked: boolean }[] } = await client.query(
      'SELECT pg_try_advisory_lock($1, $2) AS locked',
      [this.lockSpace, holderKey],
    );
    if (!locked.rows[0].locked) return false;
    if (idleTimeoutMs > 0)
      await client.query(`SELECT set_config('idle_session_timeout', $1, false)`, [`${idleTimeoutMs}ms`]);
    await client.query(`LISTEN ${CHANNEL}`);
    return true;
  }

  /** A query on the reply connection: one whose link went dead runs into its deadline, and the connection drops. */
  async ping(client: Client): Promise<void> {
    await client.query('SELECT 1');
  }
}
