import type { Assignment, PartitionKey } from '../contracts';

/**
 * The partition assignment of PARTITION_OWNED_PULL, as a pure function the coordinator workflow calls (so it is
 * deterministic, and unit-tested on its own).
 *
 * Balanced: every eligible instance owns ⌊n/m⌋ or ⌈n/m⌉ of the n partitions. Sticky: a partition stays with its
 * owner while that owner is eligible and within its share, and the larger shares go to the instances that hold
 * the most already, so a join or a loss moves only the partitions needed to rebalance. Deterministic: the same
 * input gives the same output (ties break on names).
 */

export interface AssignmentInput {
  /** Every partition to place. */
  partitions: PartitionKey[];
  /** Instances that may own partitions (alive, not drained). */
  eligible: string[];
  /** The owner each partition has now (absent or lost owners are ignored). */
  current: Record<PartitionKey, string | undefined>;
  /** Operator moves: a partition that must stay with a named instance while that instance is eligible. */
  pins?: Record<PartitionKey, string>;
}

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function assignPartitions(input: AssignmentInput): Assignment {
  const partitions = [...new Set(input.partitions)].sort(byName);
  const eligible = [...new Set(input.eligible)].sort(byName);
  const result: Assignment = {};
  if (eligible.length === 0) {
    for (const p of partitions) result[p] = undefined;
    return result;
  }
  const isEligible = new Set(eligible);
  const pins = input.pins ?? {};
  const pinned = (p: PartitionKey) => (pins[p] !== undefined && isEligible.has(pins[p]) ? pins[p] : undefined);

  // What each eligible instance holds now (pinned partitions count for their pinned owner).
  const holding = new Map(eligible.map((m) => [m, 0]));
  for (const p of partitions) {
    const owner = pinned(p) ?? input.current[p];
    if (owner !== undefined && isEligible.has(owner)) holding.set(owner, holding.get(owner)! + 1);
  }
  // Shares: the ⌈n/m⌉ ones go to whoever holds the most now, so the fewest partitions move.
  const base = Math.floor(partitions.length / eligible.length);
  const extra = partitions.length % eligible.length;
  const ranked = [...eligible].sort((a, b) => holding.get(b)! - holding.get(a)! || byName(a, b));
  const share = new Map(ranked.map((m, i) => [m, base + (i < extra ? 1 : 0)]));

  const owned = new Map(eligible.map((m) => [m, 0]));
  const take = (p: PartitionKey, owner: string) => {
    result[p] = owner;
    owned.set(owner, owned.get(owner)! + 1);
  };
  // Pins first: an operator's move holds even if it leaves the target above its share.
  for (const p of partitions) {
    const owner = pinned(p);
    if (owner !== undefined) take(p, owner);
  }
  // Then every partition stays where it is while its owner is within its share.
  const homeless: PartitionKey[] = [];
  for (const p of partitions) {
    if (result[p] !== undefined) continue;
    const owner = input.current[p];
    if (owner !== undefined && isEligible.has(owner) && owned.get(owner)! < share.get(owner)!) take(p, owner);
    else homeless.push(p);
  }
  // The rest go, in order, to the instance furthest below its share.
  for (const p of homeless) {
    const target = [...eligible].sort(
      (a, b) =>
        owned.get(a)! - share.get(a)! - (owned.get(b)! - share.get(b)!) ||
        owned.get(a)! - owned.get(b)! ||
        byName(a, b),
    )[0];
    take(p, target);
  }
  return result;
}

/** The partitions whose owner differs between two assignments. */
export function movedPartitions(before: Assignment, after: Assignment): PartitionKey[] {
  return Object.keys(after)
    .filter((p) => before[p] !== after[p])
    .sort(byName);
}
