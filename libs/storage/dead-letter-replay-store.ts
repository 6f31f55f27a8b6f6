import type { DataSource } from 'typeorm';
import type { ReplaySelection } from '../../contracts';
import { deadLetterFilterSql } from './dead-letter-filter';

// Declared with the Temporal contracts (a replay workflow's input carries it).
export type { ReplaySelection };

/** One replay's letters: its subscription's, matching its selection, none written after it started (`upToId`). */
export interface ReplayScope {
  replayId: string;
  subscriptionId: string;
  selection: ReplaySelection;
  /** The highest letter id when the replay started: letters dead-lettered later are not part of it. */
  upToId: string;
}

/** A letter a replay claimed: everything needed to send it to its subscription again. */
export interface ClaimedLetter {
  id: string;
  topic: string;
  partition: number;
  offset: number;
  attributes: Record<string, unknown>;
  data: Buffer | null;
}

export interface ClaimedBatch {
  /** The letters this replay holds now, in id order, to send. */
  letters: ClaimedLetter[];
  /** Letters of the batch another replay holds: left to it. */
  heldElsewhere: number;
  /** The last id looked at: the next batch starts after it; absent when none was left. */
  lastId?: string;
}

/** Why marking a letter changed nothing: it was deleted (purge, retention) or is no longer this replay's. */
export type ReplayMarkRejection = 'NOT_CLAIMED';

/**
 * The replay side of the dead-letter queue: which letters a replay covers, and the claim and the mark that make
 * replaying idempotent. A replay claims a batch (`replay_id`, `replay_claimed_until`) so that two replays over the
 * same letters never send one letter both; the claim of a replay that crashed is taken again at once by that
 * replay's retried activity (same replay id) and by another replay only once it expired. A letter whose sink
 * acknowledged it is marked `replayed_at` at once, one statement per letter: a replayed letter is never claimed
 * again, so running a replay twice, or another replay over the same letters, sends it no second time. A letter
 * whose replay failed stays a dead letter, with the new error, and its claim is let go. (At least once still: an
 * instance that dies between the sink's acknowledgement and the mark sends that one letter again, with the same
 * `webhook-id`.)
 */
export class DeadLetterReplayStore {
  constructor(private readonly db: DataSource) {}

  /**
   * What a replay starting now would cover: how many letters are dead (not replayed) and the highest id among
   * them (absent: none). With ids, also the ids the subscription has no letter by.
   */
  async scope(
    subscriptionId: string,
    selection: ReplaySelection,
  ): Promise<{ total: number; upToId?: string; missing: string[] }> {
    const params: unknown[] = [subscriptionId];
    const where = this.selectionSql(selection, params);
    const [row]: { total: number; up_to: string | null }[] = await this.db.query(
      `SELECT count(*)::int AS total, max(d.id)::text AS up_to FROM dead_letters d
        WHERE d.subscription_id = $1 AND d.replayed_at IS NULL ${where}`,
      params,
    );
    let missing: string[] = [];
    if ('ids' in selection) {
      const found: { id: string }[] = await this.db.query(
        `SELECT id::text AS id FROM dead_letters WHERE subscription_id = $1 AND id = ANY($2::bigint[])`,
        [subscriptionId, selection.ids],
      );
      const present = new Set(found.map((r) => r.id));
      missing = selection.ids.filter((id) => !present.has(id));
    }
    return { total: row.total, upToId: row.up_to ?? undefined, missing };
  }

  /**
   * Claims the next `limit` dead letters of the scope after `afterId` for `claimMs`, in one statement. A letter
   * another replay's live claim holds is passed over (`heldElsewhere`); one this replay claimed before (its
   * activity crashed and was retried) is claimed again.
   */
  async claim(scope: ReplayScope, afterId: string, limit: number, claimMs: number): Promise<ClaimedBatch> {
    const params: unknown[] = [scope.subscriptionId, afterId, scope.upToId, limit, scope.replayId, claimMs];
    const where = this.selectionSql(scope.selection, params);
    const rows: {
      candidate: string;
      id: string | null;
      topic: string;
      partition: number;
      offset: string;
      attributes: Record<string, unknown>;
      data: Buffer | null;
    }[] = await this.db.query(
      `WITH candidates AS (
           SELECT d.id FROM dead_letters d
            WHERE d.subscription_id = $1 AND d.id > $2::bigint AND d.id <= $3::bigint AND d.replayed_at IS NULL ${where}
            ORDER BY d.id LIMIT $4
              FOR UPDATE SKIP LOCKED
         ), claimed AS (
           UPDATE dead_letters d SET replay_id = $5, replay_claimed_until = now() + $6 * interval '1 millisecond'
             FROM candidates c
            WHERE d.id = c.id AND (d.replay_claimed_until IS NULL OR d.replay_claimed_until < now() OR d.replay_id = $5)
            RETURNING d.id, d.topic, d.partition, d.kafka_offset, d.attributes, d.data
         )
         SELECT c.id::text AS candidate, cl.id::text AS id, cl.topic, cl.partition, cl.kafka_offset::text AS "offset", cl.attributes, cl.data
           FROM candidates c LEFT JOIN claimed cl ON cl.id = c.id
          ORDER BY c.id`,
      params,
    );
    const letters = rows
      .filter((r) => r.id !== null)
      .map((r) => ({
        id: r.id!,
        topic: r.topic,
        partition: r.partition,
        offset: Number(r.offset),
        attributes: r.attributes,
        data: r.data,
      }));
    return {
      letters,
      heldElsewhere: rows.length - letters.length,
      lastId: rows.length > 0 ? rows[rows.length - 1].candidate : undefined,
    };
  }

  /** The sink acknowledged the letter: it is replayed, for good. False (`NOT_CLAIMED`): deleted, or not this replay's. */
  async markReplayed(replayId: string, id: string): Promise<{ marked: boolean; rejected?: ReplayMarkRejection }> {
    const rows: unknown[] = await this.db.query(
      `UPDATE dead_letters SET replayed_at = now(), replay_claimed_until = NULL
        WHERE id = $1::bigint AND replay_id = $2 AND replayed_at IS NULL RETURNING 1`,
      [id, replayId],
    );
    return Number(rows[1] ?? 0) === 1 ? { marked: true } : { marked: false, rejected: 'NOT_CLAIMED' };
  }

  /**
   * The replay of the letter failed: it stays a dead letter with this error, one attempt more, unclaimed (free for
   * the next replay); `replay_id` keeps naming the replay that tried it last, for its counts ({@link countIn}).
   */
  async markFailed(
    replayId: string,
    id: string,
    error: string,
  ): Promise<{ marked: boolean; rejected?: ReplayMarkRejection }> {
    const rows: unknown[] = await this.db.query(
      `UPDATE dead_letters SET last_error = $3, last_failed_at = now(), attempts = attempts + 1, replay_claimed_until = NULL
        WHERE id = $1::bigint AND replay_id = $2 AND replayed_at IS NULL RETURNING 1`,
      [id, replayId, error],
    );
    return Number(rows[1] ?? 0) === 1 ? { marked: true } : { marked: false, rejected: 'NOT_CLAIMED' };
  }

  /** Lets the claims go of letters the replay will not send now (it was stopped): free for any replay at once. */
  async release(replayId: string, ids: string[]): Promise<number> {
    if (ids.length === 0) return 0;
    const rows: unknown[] = await this.db.query(
      `UPDATE dead_letters SET replay_id = NULL, replay_claimed_until = NULL
        WHERE id = ANY($2::bigint[]) AND replay_id = $1 AND replayed_at IS NULL RETURNING 1`,
      [replayId, ids],
    );
    return Number(rows[1] ?? 0);
  }

  /**
   * What the replay did to the letters of ids (afterId, lastId], as Postgres has it: replayed by it, and failed
   * when it tried last. Read back rather than counted along, so a batch retried after a crash counts each once.
   */
  async countIn(replayId: string, afterId: string, lastId: string): Promise<{ replayed: number; failed: number }> {
    const [row]: { replayed: number; failed: number }[] = await this.db.query(
      `SELECT count(*) FILTER (WHERE replayed_at IS NOT NULL)::int AS replayed,
              count(*) FILTER (WHERE replayed_at IS NULL AND replay_claimed_until IS NULL)::int AS failed
         FROM dead_letters WHERE replay_id = $1 AND id > $2::bigint AND id <= $3::bigint`,
      [replayId, afterId, lastId],
    );
    return row;
  }

  private selectionSql(selection: ReplaySelection, params: unknown[]): string {
    if ('ids' in selection) {
      params.push(selection.ids);
      return ` AND d.id = ANY($${params.length}::bigint[])`;
    }
    // A replay covers dead letters only: whatever the filter's state, replayed ones are never sent again.
    return deadLetterFilterSql({ ...selection.filter, state: 'dead' }, params);
  }
}
