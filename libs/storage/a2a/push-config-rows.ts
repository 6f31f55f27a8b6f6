import type { DataSource } from 'typeorm';

/** A2A `AuthenticationInfo`: sent as `Authorization: <scheme> <credentials>`. */
export interface PushAuthentication {
  scheme: string;
  credentials: string;
}

/** The protocol versions a config can be set over; the version decides the shape of what it is pushed. */
export type PushWireVersion = '1.0' | '0.3';

/**
 * A push notification config of a task as the table holds it: `token` and `authentication.credentials` sealed by
 * the SecretBox (libs/a2a/push/push-configs.ts seals and opens them).
 */
export interface PushConfigRow {
  taskId: string;
  id: string;
  tenant: string;
  url: string;
  token: string | null;
  authentication: PushAuthentication | null;
  wireVersion: PushWireVersion;
  /** The task version last delivered to it (or the task's version when the config was set: nothing before is pushed). */
  pushedVersion: number;
  createdAt: Date;
}

interface RawPushConfig {
  task_id: string;
  id: string;
  tenant: string;
  url: string;
  token: string | null;
  authentication: PushAuthentication | null;
  wire_version: PushWireVersion;
  pushed_version: number;
  created_at: Date;
}

const COLUMNS = 'task_id, id, tenant, url, token, authentication, wire_version, pushed_version, created_at';

const rowOf = (r: RawPushConfig): PushConfigRow => ({
  taskId: r.task_id,
  id: r.id,
  tenant: r.tenant,
  url: r.url,
  token: r.token,
  authentication: r.authentication,
  wireVersion: r.wire_version,
  pushedVersion: r.pushed_version,
  createdAt: r.created_at,
});

/**
 * The `a2a_push_configs` table: the push notification configs of A2A tasks. Every read and write names the tenant
 * (another tenant's task has none here). A config records the task version last pushed to it, moved only forwards
 * ({@link advance}), so a push never repeats an acknowledged version nor goes back to an older one.
 */
export class PushConfigRows {
  constructor(private readonly db: DataSource) {}

  /**
   * Sets a config of the task (a config of the same id is replaced, its pushed version kept); a new one starts at
   * the task's version now. Undefined (nothing written) when the task has `max` other configs.
   */
  async put(
    task: { id: string; tenant: string; version: number },
    config: Pick<PushConfigRow, 'id' | 'url' | 'token' | 'authentication' | 'wireVersion'>,
    max: number,
  ): Promise<PushConfigRow | undefined> {
    const rows: RawPushConfig[] = await this.db.query(
      `INSERT INTO a2a_push_configs (task_id, id, tenant, url, token, authentication, wire_version, pushed_version)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8
        WHERE (SELECT count(*) FROM a2a_push_configs WHERE task_id = $1 AND tenant = $3 AND id <> $2) < $9
       ON CONFLICT (task_id, id) DO UPDATE SET url = EXCLUDED.url, token = EXCLUDED.token,
         authentication = EXCLUDED.authentication, wire_version = EXCLUDED.wire_version
        WHERE a2a_push_configs.tenant = EXCLUDED.tenant
       RETURNING ${COLUMNS}`,
      [
        task.id,
        config.id,
        task.tenant,
        config.url,
        config.token,
        config.authentication === null ? null : JSON.stringify(config.authentication),
        config.wireVersion,
        task.version,
        max,
      ],
    );
    return rows.length === 0 ? undefined : rowOf(rows[0]);
  }

  async get(tenant: string, taskId: string, id: string): Promise<PushConfigRow | undefined> {
    const rows: RawPushConfig[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_push_configs WHERE task_id = $1 AND id = $2 AND tenant = $3`,
      [taskId, id, tenant],
    );
    return rows.length === 0 ? undefined : rowOf(rows[0]);
  }

  /** The task's configs, oldest first (by creation, then id); `after` is the id of the last of the previous page. */
  async list(
    tenant: string,
    taskId: string,
    page: { size: number; after?: string },
  ): Promise<{ configs: PushConfigRow[]; more: boolean }> {
    const params: unknown[] = [taskId, tenant, page.size + 1];
    let cursor = '';
    if (page.after !== undefined) {
      params.push(page.after);
      cursor =
        ' AND (created_at, id) > (SELECT created_at, id FROM a2a_push_configs WHERE task_id = $1 AND tenant = $2 AND id = $4)';
    }
    const rows: RawPushConfig[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_push_configs WHERE task_id = $1 AND tenant = $2${cursor} ORDER BY created_at, id LIMIT $3`,
      params,
    );
    return { configs: rows.slice(0, page.size).map(rowOf), more: rows.length > page.size };
  }

  /** Every config of the task (what a push goes to). */
  async ofTask(tenant: string, taskId: string): Promise<PushConfigRow[]> {
    const rows: RawPushConfig[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_push_configs WHERE task_id = $1 AND tenant = $2 ORDER BY created_at, id`,
      [taskId, tenant],
    );
    return rows.map(rowOf);
  }

  /**
   * Removes a config; false when the tenant's task has none of that id. Its dead letters still dead are resolved
   * `config-removed` in the same statement: they stay to be read until their retention, and a config set again
   * under the same id starts with none of them (nothing the old receiver missed is sent to the new one).
   */
  async delete(tenant: string, taskId: string, id: string, incarnation?: Date): Promise<boolean> {
    // `incarnation`: only the config created then (a push answered 410 removes the config it pushed to, not one set
    // again under its id since). A JavaScript Date has milliseconds, Postgres microseconds: compared within 1 ms.
    const params: unknown[] = [taskId, id, tenant];
    if (incarnation) params.push(incarnation);
    const created = incarnation
      ? ` AND created_at BETWEEN $4::timestamptz - interval '1 millisecond' AND $4::timestamptz + interval '1 millisecond'`
      : '';
    const rows: { removed: number }[] = await this.db.query(
      `WITH removed AS (
         DELETE FROM a2a_push_configs WHERE task_id = $1 AND id = $2 AND tenant = $3${created} RETURNING 1
       ), letters AS (
         UPDATE a2a_push_dead_letters SET resolution = 'config-removed', resolved_at = now()
          WHERE task_id = $1 AND config_id = $2 AND tenant = $3 AND resolution IS NULL AND EXISTS (SELECT 1 FROM removed)
       )
       SELECT count(*)::int AS removed FROM removed`,
      params,
    );
    return rows[0].removed > 0;
  }

  /**
   * Records that `version` of the task was delivered to the config (or given up on): applied only if the config
   * is still there and behind it. False when it is not (removed meanwhile, or another push got further first).
   */
  async advance(config: Pick<PushConfigRow, 'taskId' | 'id' | 'tenant'>, version: number): Promise<boolean> {
    const [, affected]: [unknown, number] = await this.db.query(
      'UPDATE a2a_push_configs SET pushed_version = $4 WHERE task_id = $1 AND id = $2 AND tenant = $3 AND pushed_version < $4',
      [config.taskId, config.id, config.tenant, version],
    );
    return affected > 0;
  }
}
