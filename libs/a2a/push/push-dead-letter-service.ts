import type { DataSource } from 'typeorm';
import type { EventMeshConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { SecretBox } from '@libs/security';
import { PushConfigStore } from './push-configs';
import {
  parsePushLetterQuery,
  PushDeadLetter,
  PushDeadLetterStore,
  PushDeadLetterView,
  pushLetterViewOf,
} from './push-dead-letters';
import { PushWebhooks, TaskPusher } from './task-pushes';
import { A2ATaskStore } from '../tasks/task-store';

const log = createLogger('A2APushDeadLetters');

/** Bounds a redelivery's one attempt beyond the webhook timeout the sender applies itself. */
const REDELIVERY_BOUND_MS = 60_000;

export interface PushDeadLetterPage {
  items: PushDeadLetterView[];
  /** The cursor of the next page (`?cursor=`), null on the last one. */
  next: string | null;
}

/**
 * The A2A push dead letters of a tenant as the API serves them (docs/a2a.md, "Push dead letters"): browse, read one,
 * redeliver one (one attempt, now, of the task as it is: the receiver gets the whole task, at the letter's version or
 * later), remove one. Another tenant's letter is a 404 like a missing one.
 */
export class PushDeadLetters {
  /** The instance's: its push configs, tasks and letters in `db`, pushed by a pusher of its own (`webhooks`). */
  static forInstance(db: DataSource, config: EventMeshConfig, webhooks: PushWebhooks): PushDeadLetters {
    return new PushDeadLetters(
      new PushDeadLetterStore(db),
      new A2ATaskStore(db),
      new PushConfigStore(db, SecretBox.fromConfig(config)),
      TaskPusher.forInstance(db, config, webhooks),
    );
  }

  constructor(
    private readonly letters: PushDeadLetterStore,
    private readonly tasks: A2ATaskStore,
    private readonly configs: PushConfigStore,
    private readonly pusher: TaskPusher,
  ) {}

  async browse(tenant: string, query: unknown): Promise<PushDeadLetterPage> {
    const { filter, limit, after } = parsePushLetterQuery(query);
    const page = await this.letters.page(tenant, filter, { limit, after });
    if (!page)
      throw new EventMeshError(
        ErrorCode.InvalidRequest,
        'cursor: no such letter (removed since?); browse again from the start',
        { field: 'cursor' },
      );
    return {
      items: page.letters.map(pushLetterViewOf),
      next: page.more ? page.letters[page.letters.length - 1].id : null,
    };
  }

  async get(tenant: string, id: string): Promise<PushDeadLetterView> {
    return pushLetterViewOf(await this.letterOf(tenant, id));
  }

  /**
   * Pushes the letter's task, as it is now, to the letter's config, once. Acknowledged: the letter is resolved
   * (`redelivered`, with the version delivered) and answered. Otherwise it stays dead, its attempts and error
   * updated: 502 PUSH_NOT_DELIVERED; a config removed (or answered 410 now): 409 PUSH_CONFIG_GONE; a letter resolved
   * already: 409 DEAD_LETTER_RESOLVED.
   */
  async redeliver(tenant: string, id: string): Promise<PushDeadLetterView> {
    const letter = await this.letterOf(tenant, id);
    if (letter.resolution) throw resolved(letter, 'already');
    const [config, task] = await Promise.all([
      this.configs.get(tenant, letter.taskId, letter.configId),
      this.tasks.get(tenant, letter.taskId),
    ]);
    const gone = () =>
      new EventMeshError(
        ErrorCode.PushConfigGone,
        `the task's push config ${letter.configId} was removed: there is nowhere to deliver to`,
        { configId: letter.configId },
      );
    if (!config || !task) throw gone();
    // A letter of the config removed before this one was set under its id: resolved as such, nothing sent.
    if (await this.letters.resolveIfOfRemovedConfig(tenant, id)) throw gone();
    const result = await this.pusher.pushOnce(config, task, AbortSignal.timeout(REDELIVERY_BOUND_MS));
    if (result.ok) {
      log.info({ task: task.id, config: config.id, letter: id, version: task.version }, 'push dead letter redelivered');
      return pushLetterViewOf(await this.letterOf(tenant, id));
    }
    // The receiver answered 410: the config is removed, and its letters with it (resolved `config-removed`).
    if (result.gone)
      throw new EventMeshError(ErrorCode.PushConfigGone, 'the receiver answered 410 Gone: the push config is removed', {
        configId: config.id,
        httpStatus: 410,
      });
    const error = result.error ?? `HTTP ${result.status ?? '?'}`;
    if (!(await this.letters.failedAgain(tenant, id, error, result.status ?? null))) {
      // Resolved meanwhile (the worker's push of a later change was acknowledged, or the config removed): that stands.
      throw resolved(await this.letterOf(tenant, id), 'meanwhile');
    }
    throw new EventMeshError(ErrorCode.PushNotDelivered, `the receiver did not acknowledge the push: ${error}`, {
      httpStatus: result.status ?? null,
      error,
    });
  }

  async remove(tenant: string, id: string): Promise<void> {
    if (!(await this.letters.delete(tenant, id))) throw notFound(id);
  }

  private async letterOf(tenant: string, id: string) {
    const letter = await this.letters.get(tenant, id);
    if (!letter) throw notFound(id);
    return letter;
  }
}

/** 409 DEAD_LETTER_RESOLVED, saying how (and, when a push resolved it, at which task version). */
function resolved(letter: PushDeadLetter, when: 'already' | 'meanwhile'): EventMeshError {
  const how =
    letter.resolvedVersion === null
      ? `${letter.resolution}`
      : `${letter.resolution} at task version ${letter.resolvedVersion}`;
  const what = when === 'already' ? 'is resolved already' : 'was resolved meanwhile';
  return new EventMeshError(ErrorCode.DeadLetterResolved, `the letter ${what} (${how})`, {
    resolution: letter.resolution,
    resolvedVersion: letter.resolvedVersion,
  });
}

const notFound = (id: string) => new EventMeshError(ErrorCode.DeadLetterNotFound, `no push dead letter ${id}`, { id });
