import { setTimeout as sleep } from 'node:timers/promises';
import { StreamResponse } from '@a2a-js/sdk';
import type { DataSource } from 'typeorm';
import { V03PushNotificationSerializer } from '@a2a-js/sdk/compat/v0_3/server';
import { V1PushNotificationSerializer } from '@a2a-js/sdk/server';
import type { EventMeshConfig } from '@libs/config';
import { backoff, RetryPolicy } from '@libs/delivery';
import type { WebhookResult, WebhookTarget } from '@libs/delivery';
import { createLogger } from '@libs/logging';
import { SecretBox } from '@libs/security';
import { toWireTask } from '../protocol/mesh-task-handler';
import { PushConfigStore, PushWireVersion, StoredPushConfig } from './push-configs';
import { PushDeadLetterStore } from './push-dead-letters';
import { A2ATaskStore, StoredTask } from '../tasks/task-store';
import type { PushOutcome } from '../../../contracts';

const log = createLogger('A2APushes');

/** The header the config's token goes in (A2A: when the config has no authentication). */
export const PUSH_TOKEN_HEADER = 'X-A2A-Notification-Token';

/** The runtime's webhook sender (libs/delivery/webhook-sender.ts): signed, SSRF-guarded, with its timeouts. */
export interface PushWebhooks {
  sendBody(
    target: WebhookTarget,
    body: Buffer,
    headers: Record<string, string>,
    messageId: string,
    signal?: AbortSignal,
  ): Promise<WebhookResult>;
}

export interface TaskPusherOptions {
  /** The Standard Webhooks secret pushes are signed with (EVENTMESH_AGENTS_PUSH_SIGNING_SECRET); null: unsigned. */
  signingSecret: string | null;
  /** The webhook deliveries' retry policy (EVENTMESH_DELIVERY_RETRY_INITIAL_MS, _MAX_MS, _MAX_ATTEMPTS). */
  retry: RetryPolicy;
}

const serializers: Record<
  PushWireVersion,
  { serialize(r: StreamResponse, task?: never): { body: string; contentType: string } }
> = {
  '1.0': new V1PushNotificationSerializer(),
  '0.3': new V03PushNotificationSerializer(),
};

/**
 * Pushes an A2A task's updates to its push notification configs (docs/a2a.md), run by the task's workflow as an
 * activity after each change it sees (activities/a2a-task.activities.ts), so a crash before a push is followed by
 * the push again (at least once). Each config behind the task's version is sent the task as it is now: a v1.0
 * config a `StreamResponse` with the task, a v0.3 one the v0.3 `Task` (the SDK's push serializers), with the
 * config's `Authorization: <scheme> <credentials>` or its token in `X-A2A-Notification-Token`, signed and sent by
 * the runtime's webhook sender (its SSRF guard, its timeouts), retried with the webhook deliveries' backoff (never
 * sooner than a Retry-After) up to their attempt limit. Delivered, the config's version moves on (compare-and-set,
 * forwards only: never an older version after a newer one), and its dead letters up to that version are resolved
 * (`superseded`: the receiver has the whole task since); given up, the push is dead-lettered (push-dead-letters.ts)
 * and the version moves on too (the next change brings the whole task again); a 410 removes the config.
 */
export class TaskPusher {
  constructor(
    private readonly tasks: A2ATaskStore,
    private readonly configs: PushConfigStore,
    private readonly webhooks: PushWebhooks,
    private readonly options: TaskPusherOptions,
    /** Where a push given up is recorded (`a2a_push_dead_letters`). */
    private readonly letters: PushDeadLetterStore,
  ) {}

  /** The pusher of an instance: its webhook retries, the pushes' signing secret, the push configs and dead letters in `db`. */
  static forInstance(db: DataSource, config: EventMeshConfig, webhooks: PushWebhooks): TaskPusher {
    return new TaskPusher(
      new A2ATaskStore(db),
      new PushConfigStore(db, SecretBox.fromConfig(config)),
      webhooks,
      {
        signingSecret: config.agents.pushSigningSecret || null,
        retry: {
          initialMs: config.delivery.retryInitialMs,
          maxMs: config.delivery.retryMaxMs,
          maxAttempts: config.delivery.maxAttempts,
        },
      },
      new PushDeadLetterStore(db),
    );
  }

  async push(ids: { taskId: string; tenant: string }, signal: AbortSignal): Promise<PushOutcome> {
    const outcome: PushOutcome = { delivered: 0, givenUp: 0, gone: 0 };
    const task = await this.tasks.get(ids.tenant, ids.taskId);
    if (!task) return outcome;
    const behind = (await this.configs.ofTask(ids.tenant, ids.taskId)).filter((c) => c.pushedVersion < task.version);
    await Promise.all(behind.map(async (config) => outcome[await this.deliver(config, task, signal)]++));
    return outcome;
  }

  /**
   * One attempt, now, to push the task as it is to the config (an operator's redelivery of a push dead letter):
   * acknowledged, the config's version moves on to the task's and the config's dead letters up to it are resolved as
   * `redelivered`; a 410 removes the config. Answers the receiver's result.
   */
  async pushOnce(config: StoredPushConfig, task: StoredTask, signal: AbortSignal): Promise<WebhookResult> {
    const result = await this.send(config, task, signal);
    if (result.ok) await this.acknowledged(config, task.version, 'redelivered');
    else if (result.gone) await this.configs.delete(config.tenant, config.taskId, config.id, config.createdAt);
    return result;
  }

  private async deliver(config: StoredPushConfig, task: StoredTask, signal: AbortSignal): Promise<keyof PushOutcome> {
    for (let attempt = 1; ; attempt++) {
      signal.throwIfAborted();
      const result = await this.send(config, task, signal);
      // A failure that is its own cancel (the worker stopping, the activity timed out) is not the receiver's: the push
      // runs again (Temporal), and nothing is dead-lettered for it. An acknowledgement is recorded whatever came after.
      if (!result.ok) signal.throwIfAborted();
      if (result.ok) {
        // The receiver has the whole task at this version: what it missed before (dead letters) it has since.
        await this.acknowledged(config, task.version, 'superseded');
        return 'delivered';
      }
      if (result.gone) {
        await this.configs.delete(config.tenant, config.taskId, config.id, config.createdAt);
        log.info({ task: task.id, config: config.id }, 'the push receiver answered 410 Gone; its config is removed');
        return 'gone';
      }
      if (attempt >= this.options.retry.maxAttempts) {
        // Dead-lettered before the config moves on: a crash in between pushes this version again (at least once),
        // and records it once.
        await this.letters.record({
          tenant: task.tenant,
          taskId: task.id,
          agent: task.agent,
          configId: config.id,
          url: config.url,
          taskVersion: task.version,
          taskState: task.state,
          attempts: attempt,
          lastError: result.error ?? `HTTP ${result.status ?? '?'}`,
          lastHttpStatus: result.status ?? null,
        });
        await this.configs.advance(config, task.version);
        log.warn(
          { task: task.id, config: config.id, version: task.version, attempts: attempt, error: result.error },
          'push notification given up; dead-lettered',
        );
        return 'givenUp';
      }
      await sleep(Math.max(backoff(this.options.retry, attempt), result.retryAfterMs ?? 0), undefined, { signal });
    }
  }

  /** The task at `version` as a v1.0 `StreamResponse` or a v0.3 `Task`, per the config, signed and sent once. */
  private send(config: StoredPushConfig, task: StoredTask, signal: AbortSignal): Promise<WebhookResult> {
    const { body, contentType } = serializers[config.wireVersion].serialize({
      payload: { $case: 'task', value: toWireTask(task) },
    });
    const headers: Record<string, string> = { 'content-type': contentType, ...authHeadersOf(config) };
    // The same id on every attempt of this version to this config: a receiver drops a repeat by it.
    const messageId = `${task.id}:${config.id}:${task.version}`;
    return this.webhooks.sendBody(
      { sink: config.url, signingSecret: this.options.signingSecret },
      Buffer.from(body),
      headers,
      messageId,
      signal,
    );
  }

  private async acknowledged(
    config: StoredPushConfig,
    version: number,
    how: 'redelivered' | 'superseded',
  ): Promise<void> {
    // The letters first: a failure between the two writes leaves the config behind, so the push runs again (the
    // receiver drops the repeat by its webhook-id) and both are written then.
    await this.letters.resolve(config, version, how);
    await this.configs.advance(config, version);
  }
}

/** `Authorization: <scheme> <credentials>` when the config has authentication; else its token in the A2A header. */
function authHeadersOf(config: StoredPushConfig): Record<string, string> {
  if (config.authentication)
    return { authorization: `${config.authentication.scheme} ${config.authentication.credentials}` };
  if (config.token) return { [PUSH_TOKEN_HEADER.toLowerCase()]: config.token };
  return {};
}
