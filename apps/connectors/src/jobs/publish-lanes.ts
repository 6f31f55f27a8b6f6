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

/**
 * Publish requests of one source job in flight at once: one per lane. A lane's events go in requests of their own
 * (the SDK's `ordered`), so fewer lanes make larger requests: bench:connectors' outbox arm measured 0.67x the relay
 * with 8 lanes, 0.74x with 4, 0.82x with 2 and 0.76x with 1 (2026-12-08, 5 rounds each).
 */
export const PUBLISH_LANES = 2;
/** Events of one lane's request, at most, when it takes the parts of several polls: the runtime's default batch bound. */
export const LANE_REQUEST_EVENTS = 500;

/** One poll's records of one lane, and its caller. */
interface Part {
  records: Valid[];
  done: (deadLetters: NewDeadLetter[]) => void;
  failed: (e: unknown) => void;
}

interface Lane {
  topic: string;
  queue: Part[];
  /** While the lane sends: resolves when its queue is empty (never rejects). */
  sending?: Promise<void>;
  /** Why the lane stopped: a failed request. */
  broken?: unknown;
}

/**
 * A source job's publishing, several requests in flight at once without reordering an aggregate's events. Each
 * record goes to the lane of its topic and partition key (a hash of the key: every event of one aggregate takes
 * the same lane), and a lane sends one request at a time, the next only after the runtime acknowledged the one
 * before: events of one key reach the runtime in the order they were read, while the lanes' requests run side by
 * side. What queued in a lane while its request was in flight (the parts of later polls) goes out together in its
 * next request, up to {@link LANE_REQUEST_EVENTS}. A lane whose request failed sends nothing more (its queued parts
 * fail too), so a later poll never overtakes a failed earlier one: the run ends and the job reads again from its
 * committed position.
 */
export class PublishLanes {
  private readonly lanes = new Map<string, Lane>();

  constructor(
    private readonly mesh: EventMeshClient,
    private readonly count = PUBLISH_LANES,
  ) {}

  /**
   * Publishes the records of one poll, each lane's part after that lane's earlier parts, and answers the dead
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
      const key = `${r.topic}\n${laneOf(String(r.event.partitionkey ?? r.event.id), this.count)}`;
      const part = parts.get(key);
      if (part) part.records.push(r);
      else parts.set(key, { topic: r.topic, records: [r] });
    }
    const answers = [...parts].map(
      ([key, part]) =>
        new Promise<NewDeadLetter[]>((done, failed) => {
          let lane = this.lanes.get(key);
          if (!lane) this.lanes.set(key, (lane = { topic: part.topic, queue: [] }));
          if (lane.broken) return failed(lane.broken);
          lane.queue.push({ records: part.records, done, failed });
          lane.sending ??= this.drain(lane);
        }),
    );
    for (const refused of await Promise.all(answers)) deadLetters.push(...refused);
    return deadLetters;
  }

  /** Resolves once no request is in flight. */
  async settled(): Promise<void> {
    await Promise.all([...this.lanes.values()].map((lane) => lane.sending));
  }

  /** Sends the lane's queue, one request at a time, each taking the parts queued up to the bound. */
  private async drain(lane: Lane): Promise<void> {
    while (lane.queue.length > 0) {
      const taken = [lane.queue.shift()!];
      let events = taken[0].records.length;
      while (lane.queue.length > 0 && events + lane.queue[0].records.length <= LANE_REQUEST_EVENTS) {
        events += lane.queue[0].records.length;
        taken.push(lane.queue.shift()!);
      }
      try {
        const refused = await publishParts(
          this.mesh,
          lane.topic,
          taken.map((p) => p.records),
        );
        taken.forEach((p, i) => p.done(refused[i]));
      } catch (e) {
        lane.broken = e;
        for (const p of [...taken, ...lane.queue.splice(0)]) p.failed(e);
      }
    }
    lane.sending = undefined;
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
  for (const [topic, batch] of byTopic) deadLetters.push(...(await publishParts(mesh, topic, [batch]))[0]);
  return deadLetters;
}

/**
 * Publishes parts of records of one topic in one call; answers, per part, those the runtime refused for what they
 * are (a refused call is published again one event at a time to find which).
 */
async function publishParts(mesh: EventMeshClient, topic: string, parts: Valid[][]): Promise<NewDeadLetter[][]> {
  try {
    // Ordered: a call the SDK cuts into several requests (past its batch bounds, in events or bytes) sends them one
    // after another, so one aggregate's events are written in the order read.
    await mesh.publishMany(
      parts.flat().map((r) => r.event),
      { topic, ordered: true },
    );
    return parts.map(() => []);
  } catch (e) {
    if (!refusedForWhatItIs(e)) throw e;
  }
  const answers: NewDeadLetter[][] = [];
  for (const part of parts) {
    const deadLetters: NewDeadLetter[] = [];
    for (const r of part) {
      try {
        await mesh.publish(r.event, { topic });
      } catch (one) {
        if (!refusedForWhatItIs(one)) throw one;
        deadLetters.push({ reason: `${(one as EventMeshError).code}: ${(one as Error).message}`, record: r });
      }
    }
    answers.push(deadLetters);
  }
  return answers;
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
