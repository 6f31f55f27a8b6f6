import type { DataSource } from 'typeorm';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { frameFromAttributes, frameToStructured } from '@libs/frame';
import { createLogger } from '@libs/logging';
import { DeadLetterRow, DeadLetterStore } from '@libs/storage';
import { cursorAfter, isLetterId, parseBrowseQuery, parsePurgeQuery } from './dead-letter-query';

/** A dead letter as the API shows it in a list (its event's data left out: read the letter for it). */
export interface DeadLetterView {
  id: string;
  topic: string;
  partition: number;
  offset: number;
  eventId: string;
  /** The event's context attributes (type, source, extensions, ...). */
  attributes: Record<string, unknown>;
  attempts: number;
  lastError: string;
  firstFailedAt: string;
  lastFailedAt: string;
  deadLetteredAt: string;
  /** When a replay delivered it, and which; null while it is a dead letter. */
  replayedAt: string | null;
  replayId: string | null;
}

/** One dead letter with its event: structured CloudEvents JSON, or the raw record bytes when it held none. */
export interface DeadLetterDetail extends DeadLetterView {
  event: Record<string, unknown> | null;
  dataBase64: string | null;
}

export interface DeadLetterPage {
  items: DeadLetterView[];
  /** The cursor of the next page (`?cursor=`), null on the last one. */
  next: string | null;
}

/**
 * Browsing and purging a subscription's dead letters (docs/api.md, docs/operations.md). Every call names the
 * caller's tenant; the subscription is checked first, so another tenant's answers 404 exactly like a missing one.
 */
export class DeadLetterService {
  private readonly log = createLogger('DeadLetterService');
  private readonly store: DeadLetterStore;

  constructor(
    db: DataSource,
    /** Throws 404 SUBSCRIPTION_NOT_FOUND unless `tenant` has the subscription. */
    private readonly subscriptionOf: (id: string, tenant: string) => Promise<unknown>,
  ) {
    this.store = new DeadLetterStore(db);
  }

  async browse(subscriptionId: string, tenant: string, query: unknown): Promise<DeadLetterPage> {
    const { filter, limit, afterId } = parseBrowseQuery(query);
    await this.subscriptionOf(subscriptionId, tenant);
    const page = await this.store.browse(subscriptionId, tenant, filter, { afterId, limit });
    return { items: page.letters.map(viewOf), next: page.next === undefined ? null : cursorAfter(page.next) };
  }

  async get(subscriptionId: string, tenant: string, letterId: string): Promise<DeadLetterDetail> {
    await this.subscriptionOf(subscriptionId, tenant);
    const row = isLetterId(letterId) ? await this.store.findOne(subscriptionId, tenant, letterId) : undefined;
    if (!row) {
      throw new EventMeshError(
        ErrorCode.DeadLetterNotFound,
        `subscription ${subscriptionId} has no dead letter ${letterId}`,
        { id: letterId },
      );
    }
    const isEvent = typeof row.attributes.id === 'string';
    return {
      ...viewOf(row),
      event: isEvent ? frameToStructured(frameFromAttributes(row.attributes, row.data)) : null,
      dataBase64: row.data ? row.data.toString('base64') : null,
    };
  }

  /** Deletes the matching dead letters for good; `confirm` must repeat the subscription id. */
  async purge(subscriptionId: string, tenant: string, query: unknown): Promise<{ deleted: number }> {
    const filter = parsePurgeQuery(query, subscriptionId);
    await this.subscriptionOf(subscriptionId, tenant);
    const deleted = await this.store.purgeMatching(subscriptionId, tenant, filter);
    this.log.warn({ subscription: subscriptionId, tenant, filter, deleted }, 'dead letters purged');
    return { deleted };
  }
}

function viewOf(row: DeadLetterRow): DeadLetterView {
  return {
    id: row.id,
    topic: row.topic,
    partition: row.partition,
    offset: Number(row.offset),
    eventId: row.eventId,
    attributes: row.attributes,
    attempts: row.attempts,
    lastError: row.lastError,
    firstFailedAt: row.firstFailedAt.toISOString(),
    lastFailedAt: row.lastFailedAt.toISOString(),
    deadLetteredAt: row.deadLetteredAt.toISOString(),
    replayedAt: row.replayedAt ? row.replayedAt.toISOString() : null,
    replayId: row.replayId,
  };
}
