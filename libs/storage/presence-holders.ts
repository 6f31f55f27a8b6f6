import type { DataSource } from 'typeorm';

/** A presence holder id and the epoch its process claimed: the fencing token of its presence writes. */
export interface HolderEpoch {
  holder: string;
  epoch: number;
}

/**
 * Claims the next epoch of a key of `presence_holders` (entities/presence-holder.entity.ts): from now on only the
 * writes under it are taken, and those of any process that bore the key before are refused.
 */
export async function claimHolderEpoch(db: DataSource, key: string): Promise<number> {
  const [{ epoch }]: { epoch: string }[] = await db.query(
    `INSERT INTO presence_holders (holder, epoch) VALUES ($1, 1)
     ON CONFLICT (holder) DO UPDATE SET epoch = presence_holders.epoch + 1, claimed_at = now()
     RETURNING epoch`,
    [key],
  );
  return Number(epoch);
}

/** The SQL condition of a fenced write: the key (parameter `$key`) still holds the epoch (`$epoch`). */
export function holdsEpoch(key: string, epoch: string): string {
  return `EXISTS (SELECT 1 FROM presence_holders h WHERE h.holder = ${key} AND h.epoch = ${epoch} FOR SHARE)`;
}
