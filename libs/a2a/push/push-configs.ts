import { randomUUID } from 'node:crypto';
import type { TaskPushNotificationConfig } from '@a2a-js/sdk';
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import type { DataSource } from 'typeorm';
import { EventMeshError } from '@libs/errors';
import { SecretBox } from '@libs/security';
import { PushConfigRows, type PushAuthentication, type PushConfigRow, type PushWireVersion } from '@libs/storage';

export type { PushAuthentication, PushWireVersion } from '@libs/storage';

/** A push notification config of a task, as stored (`a2a_push_configs`), its token and credentials opened. */
export type StoredPushConfig = PushConfigRow;

/** A config as a client gives it, validated: what {@link PushConfigStore.put} stores. */
export type PushConfigInput = Pick<PushConfigRow, 'id' | 'url' | 'token' | 'authentication' | 'wireVersion'>;

/** Most configs one task may have; a `Create` past it is refused (-32602). */
export const MAX_CONFIGS_PER_TASK = 10;
/** Longest config id and URL accepted. */
const MAX_ID_CHARS = 128;
const MAX_URL_CHARS = 2048;

/**
 * The push notification configs of A2A tasks (the `a2a_push_configs` table, libs/storage/a2a/push-config-rows.ts),
 * their secrets sealed at rest. Every read and write names the tenant. A config records the task version last
 * pushed to it, moved only forwards ({@link advance}), so a push never repeats an acknowledged version nor goes back
 * to an older one.
 */
export class PushConfigStore {
  private readonly rows: PushConfigRows;

  /**
   * `box`: seals each config's token and credentials at rest (AES-256-GCM, the box of the webhook signing secrets),
   * and opens them when read; a value an earlier version stored in the clear is read as it is until the next boot
   * seals it (libs/security/secret-sealer.ts).
   */
  constructor(
    db: DataSource,
    private readonly box: SecretBox,
  ) {
    this.rows = new PushConfigRows(db);
  }

  private open(stored: string): string {
    return SecretBox.isSealed(stored) ? this.box.open(stored) : stored;
  }

  private readonly configOf = (r: PushConfigRow): StoredPushConfig => ({
    ...r,
    token: r.token === null ? null : this.open(r.token),
    authentication:
      r.authentication === null
        ? null
        : { scheme: r.authentication.scheme, credentials: this.open(r.authentication.credentials) },
  });

  /**
   * Sets a config of the task (a config of the same id is replaced, its pushed version kept); a new one starts at
   * the task's version now: the updates after it are pushed. Refused (-32602) past {@link MAX_CONFIGS_PER_TASK}.
   */
  async put(task: { id: string; tenant: string; version: number }, config: PushConfigInput): Promise<StoredPushConfig> {
    const row = await this.rows.put(
      task,
      {
        ...config,
        token: config.token === null ? null : this.box.seal(config.token),
        authentication:
          config.authentication === null
            ? null
            : { scheme: config.authentication.scheme, credentials: this.box.seal(config.authentication.credentials) },
      },
      MAX_CONFIGS_PER_TASK,
    );
    if (row === undefined)
      throw new RequestMalformedError(`a task has at most ${MAX_CONFIGS_PER_TASK} push notification configs`);
    return this.configOf(row);
  }

  async get(tenant: string, taskId: string, id: string): Promise<StoredPushConfig | undefined> {
    const row = await this.rows.get(tenant, taskId, id);
    return row === undefined ? undefined : this.configOf(row);
  }

  /** The task's configs, oldest first (by creation, then id); `after` is the id of the last of the previous page. */
  async list(
    tenant: string,
    taskId: string,
    page: { size: number; after?: string },
  ): Promise<{ configs: StoredPushConfig[]; more: boolean }> {
    const { configs, more } = await this.rows.list(tenant, taskId, page);
    return { configs: configs.map(this.configOf), more };
  }

  /** Every config of the task (what a push goes to). */
  async ofTask(tenant: string, taskId: string): Promise<StoredPushConfig[]> {
    return (await this.rows.ofTask(tenant, taskId)).map(this.configOf);
  }

  /** Removes a config (PushConfigRows.delete: its dead letters still dead are resolved `config-removed`). */
  delete(tenant: string, taskId: string, id: string, incarnation?: Date): Promise<boolean> {
    return this.rows.delete(tenant, taskId, id, incarnation);
  }

  /** Records that `version` of the task was delivered to the config (PushConfigRows.advance). */
  advance(config: StoredPushConfig, version: number): Promise<boolean> {
    return this.rows.advance(config, version);
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
