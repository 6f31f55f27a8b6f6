import type { EntityManager } from 'typeorm';

/**
 * Sets Postgres's `lock_timeout` for the rest of the transaction `m` runs in (set_config's `is_local`): a statement
 * that waits longer for a lock fails instead of queueing behind it.
 */
export async function setTransactionLockTimeout(m: EntityManager, timeout: string): Promise<void> {
  await m.query(`SELECT set_config('lock_timeout', $1, true)`, [timeout]);
}
