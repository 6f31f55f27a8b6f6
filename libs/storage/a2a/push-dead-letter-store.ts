import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { DEAD_LETTER_PURGE_BATCH } from '../dead-letter-store';

/** How a push dead letter stopped being dead. */
export const PUSH_LETTER_RESOLUTIONS = ['redelivered', 'superseded', 'config-removed'] as const;
export type PushLetterResolution = (typeof PUSH_LETTER_RESOLUTIONS)[number];

/** A push given up after the webhook deliveries' last attempt, as stored (`a2a_push_dead_letters`). */
export interface PushDeadLetter {
  id: string;
  tenant: string;
  taskId: string;
  agent: string;
  configId: string;
  url: string;
  /** The task version the push carried, and the task's state in it. */
  taskVersion: number;
  taskState: string;
  attempts: number;
  lastError: string;
  lastHttpStatus: number | null;
  deadLetteredAt: Date;
  /**
   * `redelivered` (an operator's redelivery was acknowledged), `superseded` (a later version was), `config-removed`
   * (the client removed the config: nothing is sent for it any more); null: dead.
   */
  resolution: PushLetterResolution | null;
  resolvedAt: Date | null;
  /** The task version the resolution delivered. */
  resolvedVersion: number | null;
}

/** What a push given up records: the config, the version, how its last attempt failed. */
export type GivenUpPush = Omit<
  PushDeadLetter,
  'id' | 'deadLetteredAt' | 'resolution' | 'resolvedAt' | 'resolvedVersion'
>;

/** The browse's filters: the letters' state (dead by default), the agent, the task. */
export interface PushDeadLetterFilter {
  state: 'dead' | 'resolved' | 'all';
  agent?: string;
  taskId?: string;
}

interface RawLetter {
  id: string;
  tenant: string;
  task_id: string;
  agent: string;
  config_id: string;
  url: string;
  task_version: number;
  task_state: string;
  attempts: number;
  last_error: string;
  last_http_status: number | null;
  dead_lettered_at: Date;
  resolution: PushLetterResolution | null;
  resolved_at: Date | null;
  resolved_version: number | null;
}

const COLUMNS =
  'id, tenant, task_id, agent, config_id, url, task_version, task_state, attempts, last_error, last_http_status, dead_lettered_at, resolution, resolved_at, resolved_version';

const letterOf = (r: RawLetter): PushDeadLetter => ({
  id: r.id,
  tenant: r.tenant,
  taskId: r.task_id,
  agent: r.agent,
  configId: r.config_id,
  url: r.url,
  taskVersion: r.task_version,
  taskState: r.task_state,
  attempts: r.attempts,
  lastError: r.last_error,
  lastHttpStatus: r.last_http_status,
  deadLetteredAt: r.dead_lettered_at,
  resolution: r.resolution,
  resolvedAt: r.resolved_at,
  resolvedVersion: r.resolved_version,
});

/** What a letter id looks like (a UUID). */
export const PUSH_LETTER_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A letter id, or a 404 (an id that is no UUID names no letter). */
export const isPushLetterId = (id: string): boolean => PUSH_LETTER_ID.test(id);

/**
 * The A2A push dead letters (`a2a_push_dead_letters`; docs/a2a.md, "Push dead letters"; libs/a2a/push serves them): one per task version and config whose push was given
 * up, kept with the task (removed with it). A letter is resolved when its receiver acknowledges the task at that
 * version or later: by an operator's redelivery, or by the push of a later change (the receiver has the whole task
 * since: `superseded`).
 */
export class PushDeadLetterStore {
  constructor(private readonly db: DataSource) {}

  /**
   * Records a push given up; once per task version and config (a push tried again records nothing more), and only
   * while the config is behind that version (a redelivery, or another attempt of the push, may have delivered it).
   */
  async record(push: GivenUpPush): Promise<void> {
    await this.db.query(
      `INSERT INTO a2a_push_dead_letters (id, tenant, task_id, agent, config_id, url, task_version, task_state, attempts, last_error, last_http_status)
       SELECT $1::uuid, $2, $3, $4, $5, $6, $7::int, $8, $9::int, $10, $11::int
        WHERE EXISTS (SELECT 1 FROM a2a_push_configs WHERE task_id = $3 AND id = $5 AND tenant = $2 AND pushed_version < $7::int)
       ON CONFLICT (task_id, config_id, task_version) DO NOTHING`,
      [
        randomUUID(),
        push.tenant,
        push.taskId,
        push.agent,
        push.configId,
        push.url,
        push.taskVersion,
        push.taskState,
        push.attempts,
        push.lastError.slice(0, 2000),
        push.lastHttpStatus,
      ],
    );
  }

  /**
   * The receiver of the config acknowledged the task at `version`: its dead letters of that version and before are
   * resolved, `how` (a redelivery, or the push of a later change). Answers how many.
   */
  async resolve(
    config: { tenant: string; taskId: string; id: string },
    version: number,
    how: 'redelivered' | 'superseded',
  ): Promise<number> {
    const [, affected]: [unknown, number] = await this.db.query(
      `UPDATE a2a_push_dead_letters SET resolution = $5, resolved_at = now(), resolved_version = $4
        WHERE task_id = $1 AND config_id = $2 AND tenant = $3 AND task_version <= $4 AND resolution IS NULL`,
      [config.taskId, config.id, config.tenant, version, how],
    );
    return affected;
  }

  /**
   * Resolves the letter `config-removed` if it is dead and older than the config now under its config's id: it was
   * recorded for a config since removed (a push given up as its config was removed records its letter after the
   * removal's statement began, which cannot see it), and what that receiver missed is not the new one's. True when
   * it did.
   */
  async resolveIfOfRemovedConfig(tenant: string, id: string): Promise<boolean> {
    const [, affected]: [unknown, number] = await this.db.query(
      `UPDATE a2a_push_dead_letters l SET resolution = 'config-removed', resolved_at = now()
         FROM a2a_push_configs c
        WHERE l.id = $1 AND l.tenant = $2 AND l.resolution IS NULL
          AND c.task_id = l.task_id AND c.id = l.config_id AND c.tenant = l.tenant AND c.created_at > l.dead_lettered_at`,
      [id, tenant],
    );
    return affected > 0;
  }

  /** A redelivery that failed: its attempt and error are added to the letter, if it is still dead. */
  async failedAgain(
    tenant: string,
    id: string,
    error: string,
    httpStatus: number | null,
  ): Promise<PushDeadLetter | undefined> {
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected].
    const [rows]: [RawLetter[], number] = await this.db.query(
      `UPDATE a2a_push_dead_letters SET attempts = attempts + 1, last_error = $3, last_http_status = $4
        WHERE id = $1 AND tenant = $2 AND resolution IS NULL RETURNING ${COLUMNS}`,
      [id, tenant, error.slice(0, 2000), httpStatus],
    );
    return rows.length === 0 ? undefined : letterOf(rows[0]);
  }

  async get(tenant: string, id: string): Promise<PushDeadLetter | undefined> {
    if (!isPushLetterId(id)) return undefined;
    const rows: RawLetter[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_push_dead_letters WHERE id = $1 AND tenant = $2`,
      [id, tenant],
    );
    return rows.length === 0 ? undefined : letterOf(rows[0]);
  }

  /**
   * A page of the tenant's letters, oldest first (by when they were dead-lettered, then id); `after` is the id of the
   * last letter of the previous page (undefined when it is no longer there: the caller answers 400).
   */
  async page(
    tenant: string,
    filter: PushDeadLetterFilter,
    page: { limit: number; after?: string },
  ): Promise<{ letters: PushDeadLetter[]; more: boolean } | undefined> {
    const where = ['tenant = $1'];
    const params: unknown[] = [tenant];
    const add = (sql: string, value: unknown) => {
      params.push(value);
      where.push(sql.replace('?', `$${params.length}`));
    };
    if (filter.state === 'dead') where.push('resolution IS NULL');
    if (filter.state === 'resolved') where.push('resolution IS NOT NULL');
    if (filter.agent !== undefined) add('agent = ?', filter.agent);
    if (filter.taskId !== undefined) add('task_id = ?', filter.taskId);
    if (page.after !== undefined) {
      const known: unknown[] = await this.db.query(
        'SELECT 1 FROM a2a_push_dead_letters WHERE id = $1 AND tenant = $2',
        [page.after, tenant],
      );
      if (known.length === 0) return undefined;
      // Compared in Postgres: its timestamps have microseconds, a JavaScript Date only milliseconds.
      params.push(page.after);
      where.push(
        `(dead_lettered_at, id) > (SELECT dead_lettered_at, id FROM a2a_push_dead_letters WHERE id = $${params.length})`,
      );
    }
    params.push(page.limit + 1);
    const rows: RawLetter[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_push_dead_letters WHERE ${where.join(' AND ')} ORDER BY dead_lettered_at, id LIMIT $${params.length}`,
      params,
    );
    return { letters: rows.slice(0, page.limit).map(letterOf), more: rows.length > page.limit };
  }

  /**
   * Deletes at most `limit` letters, dead or resolved, dead-lettered before `cutoff`, oldest first (the retention of
   * the dead letters, libs/storage/retention-purge.ts); rows another purge holds are skipped. Answers how many.
   */
  async purgeOlderThan(cutoff: Date, limit = DEAD_LETTER_PURGE_BATCH): Promise<number> {
    const [, affected]: [unknown, number] = await this.db.query(
      `DELETE FROM a2a_push_dead_letters WHERE id IN (
         SELECT id FROM a2a_push_dead_letters WHERE dead_lettered_at < $1 ORDER BY dead_lettered_at LIMIT $2 FOR UPDATE SKIP LOCKED
       )`,
      [cutoff, limit],
    );
    return affected;
  }

  /** Removes a letter; false when the tenant has none of that id. */
  async delete(tenant: string, id: string): Promise<boolean> {
    if (!isPushLetterId(id)) return false;
    const [, affected]: [unknown, number] = await this.db.query(
      'DELETE FROM a2a_push_dead_letters WHERE id = $1 AND tenant = $2',
      [id, tenant],
    );
    return affected > 0;
  }
}

/** A push dead letter as the API shows it (docs/a2a.md): its times as ISO 8601, without the tenant. */
