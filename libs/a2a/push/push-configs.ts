import { randomUUID } from 'node:crypto';
import type { TaskPushNotificationConfig } from '@a2a-js/sdk';
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import type { DataSource } from 'typeorm';
import { EventMeshError } from '@libs/errors';
import { SecretBox } from '@libs/security';

/** A2A `AuthenticationInfo`: sent as `Authorization: <scheme> <credentials>`. */
export interface PushAuthentication {
  scheme: string;
  credentials: string;
}

/** The protocol versions a config can be set over; the version decides the shape of what it is pushed. */
export type PushWireVersion = '1.0' | '0.3';

/** A push notification config of a task, as stored (`a2a_push_configs`). */
export interface StoredPushConfig {
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

/** A config as a client gives it, validated: what {@link PushConfigStore.put} stores. */
export interface PushConfigInput {
  id: string;
  url: string;
  token: string | null;
  authentication: PushAuthentication | null;
  wireVersion: PushWireVersion;
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

/** Most configs one task may have; a `Create` past it is refused (-32602). */
export const MAX_CONFIGS_PER_TASK = 10;
/** Longest config id and URL accepted. */
const MAX_ID_CHARS = 128;
const MAX_URL_CHARS = 2048;

/**
 * The `a2a_push_configs` table: the push notification configs of A2A tasks. Every read and write names the tenant
 * (another tenant's task has none here). A config records the task version last pushed to it, moved only forwards
 * ({@link advance}), so a push never repeats an acknowledged version nor goes back to an older one.
 */
export class PushConfigStore {
  /**
   * `box`: seals each config's token and credentials at rest (AES-256-GCM, the box of the webhook signing secrets),
   * and opens them when read; a value an earlier version stored in the clear is read as it is until the next boot
   * seals it (libs/security/secret-sealer.ts).
   */
  constructor(
    private readonly db: DataSource,
    private readonly box: SecretBox,
  ) {}

  private open(stored: string): string {
    return SecretBox.isSealed(stored) ? this.box.open(stored) : stored;
  }

  private readonly configOf = (r: RawPushConfig): StoredPushConfig => ({
    taskId: r.task_id,
    id: r.id,
    tenant: r.tenant,
    url: r.url,
    token: r.token === null ? null : this.open(r.token),
    authentication:
      r.authentication === null
        ? null
        : { scheme: r.authentication.scheme, credentials: this.open(r.authentication.credentials) },
    wireVersion: r.wire_version,
    pushedVersion: r.pushed_version,
    createdAt: r.created_at,
  });

  /**
   * Sets a config of the task (a config of the same id is replaced, its pushed version kept); a new one starts at
   * the task's version now: the updates after it are pushed. Refused (-32602) past {@link MAX_CONFIGS_PER_TASK}.
   */
  async put(task: { id: string; tenant: string; version: number }, config: PushConfigInput): Promise<StoredPushConfig> {
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
        config.token === null ? null : this.box.seal(config.token),
        config.authentication === null
          ? null
          : JSON.stringify({
              scheme: config.authentication.scheme,
              credentials: this.box.seal(config.authentication.credentials),
            }),
        config.wireVersion,
        task.version,
        MAX_CONFIGS_PER_TASK,
      ],
    );
    if (rows.length === 0)
      throw new RequestMalformedError(`a task has at most ${MAX_CONFIGS_PER_TASK} push notification configs`);
    return this.configOf(rows[0]);
  }

  async get(tenant: string, taskId: string, id: string): Promise<StoredPushConfig | undefined> {
    const rows: RawPushConfig[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_push_configs WHERE task_id = $1 AND id = $2 AND tenant = $3`,
      [taskId, id, tenant],
    );
    return rows.length === 0 ? undefined : this.configOf(rows[0]);
  }

  /** The task's configs, oldest first (by creation, then id); `after` is the id of the last of the previous page. */
  async list(
    tenant: string,
    taskId: string,
    page: { size: number; after?: string },
  ): Promise<{ configs: StoredPushConfig[]; more: boolean }> {
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
    return { configs: rows.slice(0, page.size).map(this.configOf), more: rows.length > page.size };
  }

  /** Every config of the task (what a push goes to). */
  async ofTask(tenant: string, taskId: string): Promise<StoredPushConfig[]> {
    const rows: RawPushConfig[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_push_configs WHERE task_id = $1 AND tenant = $2 ORDER BY created_at, id`,
      [taskId, tenant],
    );
    return rows.map(this.configOf);
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
  async advance(config: StoredPushConfig, version: number): Promise<boolean> {
    const [, affected]: [unknown, number] = await this.db.query(
      'UPDATE a2a_push_configs SET pushed_version = $4 WHERE task_id = $1 AND id = $2 AND tenant = $3 AND pushed_version < $4',
      [config.taskId, config.id, config.tenant, version],
    );
    return affected > 0;
  }
}

/**
 * A config as a client gave it (A2A `TaskPushNotificationConfig`, also inside `SendMessage`'s configuration),
 * validated: an http(s) URL, an id of at most 128 characters (a UUID when empty), the token, and the authentication
 * with both its scheme and its credentials when given. Throws -32602. The URL's addresses are checked apart
 * (the sink rules, {@link PushConfigs}).
 */
export function pushConfigInputOf(config: TaskPushNotificationConfig, wireVersion: PushWireVersion): PushConfigInput {
  const url = config.url ?? '';
  if (url === '')
    throw new RequestMalformedError("url: a push notification config needs the URL of the client's webhook");
  if (url.length > MAX_URL_CHARS) throw new RequestMalformedError(`url: at most ${MAX_URL_CHARS} characters`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RequestMalformedError('url: not a URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new RequestMalformedError('url: an http or https URL');
  if (parsed.username !== '' || parsed.password !== '')
    throw new RequestMalformedError('url: no credentials in the URL (use token or authentication)');
  const id = config.id || randomUUID();
  if (id.length > MAX_ID_CHARS || /[\s/]/.test(id))
    throw new RequestMalformedError(`id: at most ${MAX_ID_CHARS} characters, no spaces or slashes`);
  const auth = config.authentication;
  let authentication: PushAuthentication | null = null;
  if (auth && (auth.scheme || auth.credentials)) {
    if (!auth.scheme || !auth.credentials)
      throw new RequestMalformedError('authentication: both scheme and credentials');
    if (/[\s\r\n]/.test(auth.scheme) || /[\r\n]/.test(auth.credentials))
      throw new RequestMalformedError('authentication: a scheme without spaces and credentials on one line');
    authentication = { scheme: auth.scheme, credentials: auth.credentials };
  }
  if (config.token && /[\r\n]/.test(config.token)) throw new RequestMalformedError('token: one line');
  return { id, url, token: config.token || null, authentication, wireVersion };
}

/** The stored config as the A2A v1.0 `TaskPushNotificationConfig` the SDK serialises (the tenant left empty, as sent). */
export function toWirePushConfig(config: StoredPushConfig): TaskPushNotificationConfig {
  return {
    tenant: '',
    id: config.id,
    taskId: config.taskId,
    url: config.url,
    token: config.token ?? '',
    authentication: config.authentication ?? undefined,
  };
}

/**
 * The sink rules for a push URL (the SSRF guard of webhook sinks, libs/security/sink-guard.ts): a refusal is
 * answered -32602 with the guard's reason, before anything connects to the URL.
 */
export async function checkPushUrl(check: (url: string) => Promise<void>, url: string): Promise<void> {
  try {
    await check(url);
  } catch (e) {
    if (e instanceof EventMeshError) throw new RequestMalformedError(`url: ${e.message}`);
    throw e;
  }
}

/** The wire version a call came in over (the `A2A-Version` header; absent: 0.3, as the route and the SDK say). */
export function wireVersionOf(requestedVersion: string | undefined): PushWireVersion {
  return requestedVersion === '1.0' ? '1.0' : '0.3';
}
