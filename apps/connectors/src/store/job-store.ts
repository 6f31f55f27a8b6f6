import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { ConnectorJobState } from '../../../../contracts';

/** A job as stored: its config with its secrets sealed. */
export interface JobRow {
  id: string;
  tenant: string;
  name: string;
  kind: string;
  config: Record<string, unknown>;
  state: ConnectorJobState;
  lastError: string | null;
  lastErrorAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface JobView extends JobRow {
  position: string | null;
  moved: number;
  deadLettered: number;
  positionUpdatedAt: Date | null;
  epoch: number | null;
  owner: string | null;
  renewedAt: Date | null;
  rejectedWrites: number;
  /** Events moved in the last 60 s (the fenced commits' per-second counts). */
  movedLastMinute: number;
}

export interface DeadLetterRow {
  id: string;
  jobId: string;
  reason: string;
  record: unknown;
  createdAt: Date;
  replayedAt: Date | null;
}

const VIEW = `
  SELECT j.*, p.position, p.moved, p.dead_lettered, p.updated_at AS position_updated_at,
         r.epoch, r.owner, r.renewed_at, r.rejected_writes,
         (SELECT COALESCE(sum(m.moved), 0) FROM connectors.job_moved m
           WHERE m.job_id = j.id AND m.at > now() - interval '1 minute') AS moved_last_minute
    FROM connectors.jobs j
    LEFT JOIN connectors.job_positions p ON p.job_id = j.id
    LEFT JOIN connectors.job_runs r ON r.job_id = j.id`;

/**
 * The jobs of `connectors.jobs`, always read and changed by tenant: another tenant's job reads as no job at all.
 * Unfenced writes only (create, reconfigure, state, last error): the run's own writes go through JobRunStore.
 */
export class JobStore {
  constructor(private readonly db: DataSource) {}

  /** Creates the job; undefined when the tenant already has one by that name. */
  async create(
    tenant: string,
    name: string,
    kind: string,
    config: Record<string, unknown>,
  ): Promise<JobRow | undefined> {
    const rows: Record<string, unknown>[] = await this.db.query(
      `INSERT INTO connectors.jobs (id, tenant, name, kind, config) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (tenant, name) DO NOTHING RETURNING *`,
      [randomUUID(), tenant, name, kind, config],
    );
    return rows[0] ? jobOf(rows[0]) : undefined;
  }

  async get(tenant: string, id: string): Promise<JobView | undefined> {
    const rows: Record<string, unknown>[] = await this.db.query(`${VIEW} WHERE j.tenant = $1 AND j.id = $2`, [
      tenant,
      id,
    ]);
    return rows[0] ? viewOf(rows[0]) : undefined;
  }

  /** The job by id alone: for its run, which has no caller. */
  async byId(id: string): Promise<JobRow | undefined> {
    const rows: Record<string, unknown>[] = await this.db.query(`SELECT * FROM connectors.jobs WHERE id = $1`, [id]);
    return rows[0] ? jobOf(rows[0]) : undefined;
  }

  async list(tenant: string): Promise<JobView[]> {
    const rows: Record<string, unknown>[] = await this.db.query(`${VIEW} WHERE j.tenant = $1 ORDER BY j.created_at`, [
      tenant,
    ]);
    return rows.map(viewOf);
  }

  async reconfigure(tenant: string, id: string, config: Record<string, unknown>): Promise<boolean> {
    const [, n] = (await this.db.query(
      `UPDATE connectors.jobs SET config = $3, updated_at = now(), last_error = NULL WHERE tenant = $1 AND id = $2`,
      [tenant, id, config],
    )) as [unknown, number];
    return n > 0;
  }

  async setState(id: string, state: ConnectorJobState): Promise<void> {
    await this.db.query(`UPDATE connectors.jobs SET state = $2, updated_at = now() WHERE id = $1`, [id, state]);
  }

  /** The error that stopped the job's last round (null: the round after it went through). */
  async setLastError(id: string, error: string | null): Promise<void> {
    await this.db.query(
      `UPDATE connectors.jobs SET last_error = $2, last_error_at = CASE WHEN $2::text IS NULL THEN last_error_at ELSE now() END
       WHERE id = $1 AND last_error IS DISTINCT FROM $2`,
      [id, error],
    );
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    const [, n] = (await this.db.query(`DELETE FROM connectors.jobs WHERE tenant = $1 AND id = $2`, [tenant, id])) as [
      unknown,
      number,
    ];
    return n > 0;
  }

  async deadLetters(jobId: string, after: string | undefined, limit: number): Promise<DeadLetterRow[]> {
    const rows: Record<string, unknown>[] = await this.db.query(
      `SELECT * FROM connectors.dead_letters WHERE job_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
      [jobId, after ?? '0', limit],
    );
    return rows.map(deadLetterOf);
  }

  async deadLetter(jobId: string, id: string): Promise<DeadLetterRow | undefined> {
    const rows: Record<string, unknown>[] = await this.db.query(
      `SELECT * FROM connectors.dead_letters WHERE job_id = $1 AND id = $2`,
      [jobId, id],
    );
    return rows[0] ? deadLetterOf(rows[0]) : undefined;
  }

  /**
   * Replays dead letter `id` of `jobId` by `replay` (which answers why it was refused again, or nothing): the letter
   * is marked replayed first, in a transaction held while `replay` runs, committed when it succeeds and rolled back
   * when it is refused or fails. A refusal of the same event recorded meanwhile (the job refusing it again) waits
   * for the mark and becomes a letter of its own; marked after the replay, it found this letter still waiting and
   * was not recorded. A letter replayed already (by an earlier call, or by one running at the same time, whose mark
   * this call waits for) is not replayed again: {@link AlreadyReplayedError}; one gone meanwhile:
   * {@link DeadLetterGoneError}.
   */
  async replay(jobId: string, id: string, replay: () => Promise<string | undefined>): Promise<string | undefined> {
    const runner = this.db.createQueryRunner();
    await runner.connect();
    try {
      await runner.startTransaction();
      const marked = (await runner.query(
        `UPDATE connectors.dead_letters SET replayed_at = now()
          WHERE job_id = $1 AND id = $2 AND replayed_at IS NULL RETURNING id`,
        [jobId, id],
      )) as [unknown[], number];
      if (marked[1] === 0) {
        const found = (await runner.query(
          `SELECT replayed_at FROM connectors.dead_letters WHERE job_id = $1 AND id = $2`,
          [jobId, id],
        )) as { replayed_at: Date }[];
        await runner.rollbackTransaction();
        throw found.length > 0 ? new AlreadyReplayedError(id, found[0].replayed_at) : new DeadLetterGoneError(id);
      }
      const refused = await replay();
      await (refused === undefined ? runner.commitTransaction() : runner.rollbackTransaction());
      return refused;
    } catch (e) {
      // Never back to the pool inside a transaction (the UPDATE or the replay failed).
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw e;
    } finally {
      await runner.release();
    }
  }
}

/** A dead letter replayed already: replaying it again would publish (or write) its record twice. */
export class AlreadyReplayedError extends Error {
  constructor(
    readonly deadLetterId: string,
    readonly replayedAt: Date,
  ) {
    super(`dead letter ${deadLetterId} was replayed already`);
    this.name = 'AlreadyReplayedError';
  }
}

/** A dead letter gone while a replay was asked (its job deleted meanwhile). */
export class DeadLetterGoneError extends Error {
  constructor(readonly deadLetterId: string) {
    super(`dead letter ${deadLetterId} is gone`);
    this.name = 'DeadLetterGoneError';
  }
}

function jobOf(r: Record<string, unknown>): JobRow {
  return {
    id: r.id as string,
    tenant: r.tenant as string,
    name: r.name as string,
    kind: r.kind as string,
    config: r.config as Record<string, unknown>,
    state: r.state as ConnectorJobState,
    lastError: (r.last_error as string | null) ?? null,
    lastErrorAt: (r.last_error_at as Date | null) ?? null,
    createdAt: r.created_at as Date,
    updatedAt: r.updated_at as Date,
  };
}

function viewOf(r: Record<string, unknown>): JobView {
  return {
    ...jobOf(r),
    position: (r.position as string | null) ?? null,
    moved: Number(r.moved ?? 0),
    deadLettered: Number(r.dead_lettered ?? 0),
    positionUpdatedAt: (r.position_updated_at as Date | null) ?? null,
    epoch: r.epoch === null || r.epoch === undefined ? null : Number(r.epoch),
    owner: (r.owner as string | null) ?? null,
    renewedAt: (r.renewed_at as Date | null) ?? null,
    rejectedWrites: Number(r.rejected_writes ?? 0),
    movedLastMinute: Number(r.moved_last_minute ?? 0),
  };
}

function deadLetterOf(r: Record<string, unknown>): DeadLetterRow {
  return {
    id: String(r.id),
    jobId: r.job_id as string,
    reason: r.reason as string,
    record: r.record,
    createdAt: r.created_at as Date,
    replayedAt: (r.replayed_at as Date | null) ?? null,
  };
}
