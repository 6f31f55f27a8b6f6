import type { DataSource, EntityManager } from 'typeorm';

/** Why events were skipped. Kafka retention is the one cause today: the events were gone before delivery. */
export type SkipReason = 'RETENTION';

/** Offsets `fromOffset` up to, not including, `toOffset` of one partition that a subscription never got. */
export interface SkippedRange {
  subscriptionId: string;
  topic: string;
  partition: number;
  fromOffset: number;
  toOffset: number;
  reason: SkipReason;
  epoch: number;
}

export interface StoredSkippedRange extends SkippedRange {
  /** Events in the range: `toOffset - fromOffset`. */
  events: number;
  firstRecordedAt: Date;
  lastRecordedAt: Date;
}

/**
 * What a write did. `RECORDED`: a new range. `EXTENDED`: the range starting at the same offset was recorded
 * before and ends later now (the log start moved on before a retried run got there). `ALREADY_RECORDED`: the
 * same range (or a longer one) is stored; nothing changed.
 */
export type SkipOutcome = 'RECORDED' | 'EXTENDED' | 'ALREADY_RECORDED';

/** Why a write changed nothing: the range holds no offset, or the subscription no longer exists. */
export type SkipRejection = 'EMPTY_RANGE' | 'SUBSCRIPTION_GONE';

export interface SkipRecordResult {
  range: SkippedRange;
  applied: boolean;
  outcome?: SkipOutcome;
  rejected?: SkipRejection;
  /** Events this write added to the record (0 when it was recorded before): what a counter may add. */
  newlySkipped: number;
  /** The end of the stored range before this write, when there was one. */
  previousToOffset?: number;
}

/** One subscription's skips recorded within a window, for `/health`. */
export interface SkipSummary {
  subscriptionId: string;
  ranges: number;
  events: number;
  /** When the earliest of these ranges was first recorded. */
  since: Date;
  /** When the latest was last recorded. */
  latest: Date;
}

export interface SkipReport {
  /** Every subscription with a skip in the window, and the events skipped in all of them. */
  subscriptions: number;
  events: number;
  /** The subscriptions with the latest skips, at most the limit asked for. */
  latest: SkipSummary[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The `skipped_ranges` table: a durable record of every range of events a subscription never got because Kafka
 * no longer had them. A loop writes it (in its fenced transaction, like its other writes) before it moves the
 * subscription's offset past the range, so a skip is never silent. A write is idempotent per range: recording
 * the same start again (a retried run, a crash before the commit) extends the one row to the later end and
 * never counts an event twice.
 */
export class SkippedRangeStore {
  constructor(private readonly db: DataSource) {}

  async record(range: SkippedRange, manager: EntityManager = this.db.manager): Promise<SkipRecordResult> {
    if (range.toOffset <= range.fromOffset) return { range, applied: false, rejected: 'EMPTY_RANGE', newlySkipped: 0 };
    const [row]: { exists: boolean; prior_to: string | null; written_to: string | null }[] = await manager.query(
      `WITH sub AS (
         -- Holds the subscription row until commit, so a concurrent delete cannot break the foreign key.
         SELECT id FROM subscriptions WHERE id = $1 FOR KEY SHARE
       ), prior AS (
         SELECT to_offset FROM skipped_ranges
          WHERE subscription_id = $1 AND topic = $2 AND partition = $3 AND from_offset = $4
       ), written AS (
         INSERT INTO skipped_ranges AS r
                (subscription_id, topic, partition, from_offset, to_offset, reason, epoch, first_recorded_at, last_recorded_at)
         SELECT sub.id, $2, $3, $4, $5, $6, $7, now(), now() FROM sub
         ON CONFLICT (subscription_id, topic, partition, from_offset) DO UPDATE
           SET to_offset = EXCLUDED.to_offset, epoch = GREATEST(r.epoch, EXCLUDED.epoch), last_recorded_at = now()
           WHERE r.to_offset < EXCLUDED.to_offset
         RETURNING r.to_offset
       )
       SELECT EXISTS (SELECT 1 FROM sub) AS exists,
              (SELECT to_offset FROM prior) AS prior_to,
              (SELECT to_offset FROM written) AS written_to`,
      [range.subscriptionId, range.topic, range.partition, range.fromOffset, range.toOffset, range.reason, range.epoch],
    );
    if (!row.exists) return { range, applied: false, rejected: 'SUBSCRIPTION_GONE', newlySkipped: 0 };
    const prior = row.prior_to === null ? undefined : Number(row.prior_to);
    if (row.written_to === null)
      return { range, applied: true, outcome: 'ALREADY_RECORDED', newlySkipped: 0, previousToOffset: prior };
    if (prior === undefined)
      return { range, applied: true, outcome: 'RECORDED', newlySkipped: range.toOffset - range.fromOffset };
    return { range, applied: true, outcome: 'EXTENDED', newlySkipped: range.toOffset - prior, previousToOffset: prior };
  }

  /**
   * A subscription's skipped ranges, by topic, partition and offset; undefined when `tenant` has no subscription
   * by that id (another tenant's, a missing one, or a malformed id: the same answer).
   */
  async listFor(subscriptionId: string, tenant: string, limit = 1000): Promise<StoredSkippedRange[] | undefined> {
    if (!UUID.test(subscriptionId)) return undefined;
    const rows: {
      exists: boolean;
      topic: string | null;
      partition: number | null;
      from_offset: string | null;
      to_offset: string | null;
      reason: string | null;
      epoch: string | null;
      first_recorded_at: Date | null;
      last_recorded_at: Date | null;
    }[] = await this.db.query(
      `SELECT true AS exists, r.topic, r.partition, r.from_offset, r.to_offset, r.reason, r.epoch, r.first_recorded_at, r.last_recorded_at
         FROM subscriptions s
         LEFT JOIN LATERAL (
           SELECT * FROM skipped_ranges WHERE subscription_id = s.id ORDER BY topic, partition, from_offset LIMIT $2
         ) r ON true
        WHERE s.id = $1 AND s.tenant = $3`,
      [subscriptionId, limit, tenant],
    );
    if (rows.length === 0) return undefined;
    return rows
      .filter((r) => r.topic !== null)
      .map((r) => ({
        subscriptionId,
        topic: r.topic!,
        partition: r.partition!,
        fromOffset: Number(r.from_offset),
        toOffset: Number(r.to_offset),
        events: Number(r.to_offset) - Number(r.from_offset),
        reason: r.reason as SkipReason,
        epoch: Number(r.epoch),
        firstRecordedAt: r.first_recorded_at!,
        lastRecordedAt: r.last_recorded_at!,
      }));
  }

  /** The skips recorded (or extended) since `since`, per subscription, latest first; one statement. */
  async recordedSince(since: Date, limit = 20): Promise<SkipReport> {
    const rows: {
      subscription_id: string;
      ranges: number;
      events: string;
      since: Date;
      latest: Date;
      subscriptions: number;
      total_events: string;
    }[] = await this.db.query(
      `SELECT subscription_id, count(*)::int AS ranges, sum(to_offset - from_offset)::bigint AS events,
              min(first_recorded_at) AS since, max(last_recorded_at) AS latest,
              (count(*) OVER ())::int AS subscriptions, (sum(sum(to_offset - from_offset)) OVER ())::bigint AS total_events
         FROM skipped_ranges
        WHERE last_recorded_at >= $1
        GROUP BY subscription_id
        ORDER BY latest DESC, subscription_id
        LIMIT $2`,
      [since, limit],
    );
    return {
      subscriptions: rows[0]?.subscriptions ?? 0,
      events: Number(rows[0]?.total_events ?? 0),
      latest: rows.map((r) => ({
        subscriptionId: r.subscription_id,
        ranges: r.ranges,
        events: Number(r.events),
        since: r.since,
        latest: r.latest,
      })),
    };
  }
}
