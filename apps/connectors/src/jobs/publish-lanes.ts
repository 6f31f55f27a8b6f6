import {
  EventMeshError,
  NotFoundError,
  PayloadTooLargeError,
  ValidationError,
  type EventMeshClient,
} from '@eventmesh/client';
import type { NewDeadLetter } from '../store/job-run-store';
import type { SourceRecord } from '../spi';

type Valid = Extract<SourceRecord, { ok: true }>;

/** Publish requests of one source job in flight at once: one per lane. */
export const PUBLISH_LANES = 8;

/**
 * A source job's publishing, several requests in flight at once without reordering an aggregate's events. Each
 * record goes to the lane of its topic and partition key (a hash of the key: every event of one aggregate takes
 * the same lane), and a lane sends its requests one after the other, each only after the runtime acknowledged the
 * one before: events of one key reach the runtime in the order they were read, as with one request at a time,
 * while the lanes' requests run side by side. A lane whose request failed sends nothing more (each request is
 * chained to the one before it), so a later batch never overtakes a failed earlier one: the run ends and the job
 * reads again from its committed position.
 */
export class PublishLanes {
  private readonly tails = new Map<string, Promise<unknown>>();

  constructor(
    private readonly mesh: EventMeshClient,
    private readonly lanes = PUBLISH_LANES,
  ) {}

  /**
   * Publishes the records of one poll, each lane's part after that lane's earlier requests, and answers the dead
   * letters once every part was acknowledged (see {@link publish}); rejects with the first failure.
   */
  async publish(records: SourceRecord[]): Promise<NewDeadLetter[]> {
    const deadLetters: NewDeadLetter[] = [];
    const parts = new Map<string, { topic: string; records: Valid[] }>();
    for (const r of records) {
      if (!r.ok) {
        deadLetters.push({ reason: r.reason, record: r.raw });
        continue;
      }
      const lane = `${r.topic}\n${laneOf(String(r.event.partitionkey ?? r.event.id), this.lanes)}`;
      const part = parts.get(lane);
      if (part) part.records.push(r);
      else parts.set(lane, { topic: r.topic, records: [r] });
    }
    const sent = [...parts].map(([lane, part]) => {
      const request = (this.tails.get(lane) ?? Promise.resolve()).then(() =>
        publishTopic(this.mesh, part.topic, part.records),
      );
      this.tails.set(lane, request);
      return request;
    });
    for (const refused of await Promise.all(sent)) deadLetters.push(...refused);
    return deadLetters;
  }

  /** Resolves once no request is in flight (every lane's last one answered or failed). */
  async settled(): Promise<void> {
    await Promise.allSettled(this.tails.values());
  }
}

/**
 * Publishes every valid record, by topic, and answers the dead letters: the invalid ones, and those the runtime
 * refused for what they are. A batch the runtime refuses is published one event at a time to find which.
 * Anything else (the runtime unreachable, the credential refused) throws: the round is tried again.
 */
export async function publish(mesh: EventMeshClient, records: SourceRecord[]): Promise<NewDeadLetter[]> {
  const deadLetters: NewDeadLetter[] = [];
  const byTopic = new Map<string, Valid[]>();
  for (const r of records) {
    if (!r.ok) deadLetters.push({ reason: r.reason, record: r.raw });
    else if (byTopic.has(r.topic)) byTopic.get(r.topic)!.push(r);
    else byTopic.set(r.topic, [r]);
  }
  for (const [topic, batch] of byTopic) deadLetters.push(...(await publishTopic(mesh, topic, batch)));
  return deadLetters;
}

/** Publishes records of one topic in one call; answers those the runtime refused for what they are. */
async function publishTopic(mesh: EventMeshClient, topic: string, batch: Valid[]): Promise<NewDeadLetter[]> {
  try {
    await mesh.publishMany(
      batch.map((r) => r.event),
      { topic },
    );
    return [];
  } catch (e) {
    if (!refusedForWhatItIs(e)) throw e;
  }
  const deadLetters: NewDeadLetter[] = [];
  for (const r of batch) {
    try {
      await mesh.publish(r.event, { topic });
    } catch (one) {
      if (!refusedForWhatItIs(one)) throw one;
      deadLetters.push({ reason: `${(one as EventMeshError).code}: ${(one as Error).message}`, record: r });
    }
  }
  return deadLetters;
}

/**
 * The runtime refused the event itself (invalid, too large, or a topic the job's tenant has not: another tenant's
 * topic is a 404), not the caller (401/403) or the moment (429/503).
 */
function refusedForWhatItIs(e: unknown): boolean {
  return e instanceof ValidationError || e instanceof NotFoundError || e instanceof PayloadTooLargeError;
}

/** A key's lane: FNV-1a of its UTF-16 units, modulo the lanes. */
export function laneOf(key: string, lanes: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h >>> 0) % lanes;
}
