import { createLogger } from '@libs/logging';
import { CoalescingRenewal } from '@libs/runtime';
import type { SessionUsageStore } from '@libs/storage';
import type { SessionQuotas } from './session-quotas';

/** How often a process rewrites its usage rows and reads the others'. */
export const SESSION_USAGE_RENEW_MS = 1000;
/** A row not renewed within this is of a dead process: its usage counts for nothing. */
const SESSION_USAGE_FRESH_MS = 5000;
/** Rows older than this are deleted (by any process). */
const SESSION_USAGE_EXPIRE_MS = 60_000;

/**
 * Holds a tenant's session quotas across the runtime: this process's usage (sessions, agent replicas, bytes in flight
 * by tenant) is written to `session_usage` at once on a change (one write at a time, coalesced) and every
 * {@link SESSION_USAGE_RENEW_MS}, and each write reads back the other processes' fresh rows, which the quotas add
 * to their own. So a process sees another's charge at its next exchange, a second or less after that charge was
 * written: opens on several processes within that second are checked against counts that do not include each
 * other yet (docs/streaming-sessions.md#security says how far past a cap that can go).
 */
export class SessionUsage {
  private readonly log = createLogger('SessionUsage');
  private readonly renewal = new CoalescingRenewal('session usage rows', SESSION_USAGE_RENEW_MS, () => this.write());
  private renewals = 0;

  constructor(
    private readonly store: SessionUsageStore,
    private readonly quotas: SessionQuotas,
    private readonly me: { holder: string; instanceId: string },
  ) {}

  start(): void {
    this.quotas.onChange(() => this.renewal.renew());
    this.renewal.start();
    this.renewal.renew();
  }

  /** Stops renewing and deletes this process's rows (a clean shutdown: what it held stops counting now). */
  async close(): Promise<void> {
    await this.renewal.close();
    await this.store
      .forget(this.me.holder)
      .catch((e: Error) => this.log.warn({ error: e.message }, 'cannot delete the session usage rows'));
  }

  private async write(): Promise<void> {
    const peers = await this.store.exchange(
      this.me.holder,
      this.me.instanceId,
      this.quotas.local(),
      SESSION_USAGE_FRESH_MS,
    );
    this.quotas.setPeers(peers);
    if (++this.renewals % 30 === 0) await this.store.expire(SESSION_USAGE_EXPIRE_MS);
  }
}
