import { frameFromAttributes, partitionKeyOf } from '@libs/frame';
import type { ParkedDelivery, RetryStore } from '@libs/storage';
import type { Lane } from './lane';

/**
 * A key of a `key`-ordered lane whose event was parked (ordering.ts): its parked deliveries in offset order, the
 * first one (`queue[0]`) attempted by the lane when due and the others only after it (delivered or
 * dead-lettered), so the key keeps its order while the lane's other keys go on. The key's later events in Kafka
 * are parked behind the queue rather than delivered. The retry sweep leaves a `key`-ordered subscription's parked
 * deliveries to its lanes. `sending` is set while the head is out.
 */
export interface HeldKey {
  queue: ParkedDelivery[];
  sending: boolean;
}

/** Parked deliveries a lane reads at once when it loads its held keys. */
const LOAD_BATCH = 256;

/** The key of a parked delivery, as {@link keyOf} names a record's (ordering.ts). */
export function keyOfParked(parked: ParkedDelivery): string {
  return `k:${partitionKeyOf(frameFromAttributes(parked.attributes, parked.data))}`;
}

/** `parked` (written to the retry table) goes to the end of its key's queue; the key is held from now on. */
export function holdKey(lane: Lane, key: string, parked: ParkedDelivery): void {
  const held = lane.held.get(key);
  if (held) held.queue.push(parked);
  else lane.held.set(key, { queue: [parked], sending: false });
}

/** The head of a held key is done (delivered or dead-lettered): the next goes, or the key is free again. */
export function releaseHead(lane: Lane, key: string): void {
  const held = lane.held.get(key);
  if (!held) return;
  held.queue.shift();
  if (held.queue.length === 0) lane.held.delete(key);
}

/**
 * The held keys of a lane from the retry table: every parked delivery of its subscription partition, grouped by
 * key in offset order, each due at once. Run when the lane starts (parked deliveries of an earlier run), and when its breaker
 * opened or it was held at the parking cap; nothing of the lane is out then.
 */
export async function loadHeld(lane: Lane, retries: Pick<RetryStore, 'backlogOf'>): Promise<void> {
  const at = { subscriptionId: lane.subscription.id, topic: lane.topic, partition: lane.partition };
  const held = new Map<string, HeldKey>();
  let after = -1;
  for (;;) {
    const batch = await retries.backlogOf(at, LOAD_BATCH, after);
    for (const parked of batch) {
      // Due at once, as ordered recovery delivers a partition's backlog at the sink's pace; a failure reschedules it.
      parked.nextAttemptAt = new Date(0);
      const key = keyOfParked(parked);
      const h = held.get(key);
      if (h) h.queue.push(parked);
      else held.set(key, { queue: [parked], sending: false });
      after = parked.offset;
    }
    if (batch.length < LOAD_BATCH) break;
  }
  lane.held = held;
}
