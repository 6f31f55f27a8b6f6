import type { EventFrame } from '@libs/frame';
import type { TaskRequestRecord } from '../../../contracts';

/** How long a handed-off request waits for its delivery before it is dropped (the delivery then reads Kafka). */
const HANDOFF_TTL_MS = 10_000;
/** Most requests held at once; the oldest goes first. */
const HANDOFF_MAX = 1000;

const keyOf = (r: TaskRequestRecord) => `${r.topic}#${r.partition}@${r.offset}`;

/**
 * A task's request, as the gateway of this process wrote it to Kafka, handed to the delivery this process's worker
 * runs next (eager start: its first workflow task comes back to this worker): the delivery takes it from here
 * instead of reading the record back from Kafka. It is the frame Kafka acknowledged, so what the agent is sent is
 * the same; a delivery anywhere else, or later than HANDOFF_TTL_MS, or after HANDOFF_MAX newer ones, reads Kafka.
 */
export class RequestHandoff {
  private readonly held = new Map<string, { frame: EventFrame; at: number }>();
  /** Requests handed off, and those a delivery took (`/health` `stats.a2aRequestHandoff`). */
  private readonly counts = { handed: 0, taken: 0 };

  put(record: TaskRequestRecord, frame: EventFrame): void {
    const now = Date.now();
    for (const [key, entry] of this.held) {
      if (this.held.size < HANDOFF_MAX && now - entry.at < HANDOFF_TTL_MS) break;
      this.held.delete(key);
    }
    this.held.set(keyOf(record), { frame, at: now });
    this.counts.handed++;
  }

  /** The frame handed off for this record, once (a delivery tried again reads Kafka). */
  take(record: TaskRequestRecord): EventFrame | undefined {
    const key = keyOf(record);
    const entry = this.held.get(key);
    if (!entry) return undefined;
    this.held.delete(key);
    if (Date.now() - entry.at >= HANDOFF_TTL_MS) return undefined;
    this.counts.taken++;
    return entry.frame;
  }

  get size(): number {
    return this.held.size;
  }

  stats(): { handed: number; taken: number; held: number } {
    return { ...this.counts, held: this.held.size };
  }
}
