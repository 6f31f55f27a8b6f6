import { Client, WorkflowNotFoundError } from '@temporalio/client';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '@libs/logging';
import { reasonOf, withDeadline } from '@libs/runtime';
import { instanceWorkflowIdOf, livenessLostSignal } from '../../contracts';
import type { LivenessLock } from './liveness-lock';

export interface CrashWatchOptions {
  instanceId: string;
  leaseTtlMs: number;
  /** The liveness window ({@link LivenessLock}): how long a peer whose session ended may still believe it holds. */
  windowMs: number;
  /**
   * How long this instance's own session must have held its lock before it judges the peers': after Postgres
   * restarted, every session is new and every peer's lock is released until that peer takes it again.
   */
  graceMs: number;
}

/**
 * Starts the takeover of a crashed peer at once, instead of after its lease TTL. {@link LivenessLock} reports the
 * partition owners whose liveness lock no session holds; for each, this instance:
 *
 * 1. takes that lock itself (only one instance does; none if the peer took it back),
 * 2. waits the liveness window: a peer alive after all (its session ended by a network blip or the server) has
 *    stopped fetching and delivering by then, and cannot take its lock back while this instance holds it,
 * 3. signals the peer's lease workflow `livenessLost`, which ends the lease as lost: the coordinator moves the
 *    partitions at once, and each new owner claims the next epoch, so the fence refuses any write of the old one,
 * 4. waits (at most a TTL) for that lease run to end, then lets the lock go. A peer alive after all takes its lock
 *    back only then, sees its lease run ended, and joins again (OwnershipAgent) with its loops shut meanwhile.
 *
 * The same peer is tried at most once a TTL. A paused peer or a silently cut link keeps its session: the TTL.
 */
export class CrashWatch {
  private readonly log = createLogger('CrashWatch');
  private readonly triedAt = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();
  private stopped = false;
  /** Lease runs this instance ended after a peer's crash. */
  takeovers = 0;

  constructor(
    private readonly client: Client,
    private readonly liveness: LivenessLock,
    private readonly options: CrashWatchOptions,
  ) {
    liveness.onReleased = (owners) => this.released(owners);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
  }

  private released(owners: string[]): void {
    if (this.stopped || this.liveness.heldForMs() < this.options.graceMs) return;
    const now = Date.now();
    for (const peer of owners) {
      if (now - (this.triedAt.get(peer) ?? 0) < this.options.leaseTtlMs) continue;
      this.triedAt.set(peer, now);
      const attempt = this.takeOver(peer)
        .catch((e: unknown) => this.log.warn({ peer, error: reasonOf(e) }, 'could not start the takeover of a peer'))
        .finally(() => this.running.delete(attempt));
      this.running.add(attempt);
    }
  }

  private async takeOver(peer: string): Promise<void> {
    const session = this.liveness.acquiredAt();
    if (!(await this.liveness.lockPeer(peer))) return;
    try {
      await sleep(this.options.windowMs);
      // This instance's own session ended meanwhile, and with it the lock it held for the peer: judge again later.
      if (this.liveness.acquiredAt() !== session) return;
      const lease = this.client.workflow.getHandle(instanceWorkflowIdOf(peer));
      try {
        await lease.signal(
          livenessLostSignal,
          `its liveness lock was released (its Postgres session ended); found by ${this.options.instanceId}`,
        );
      } catch (e) {
        if (e instanceof WorkflowNotFoundError) return; // its lease already ended (a clean stop, or the TTL)
        throw e;
      }
      this.takeovers++;
      this.log.warn({ peer }, 'peer crashed (its liveness lock was released): its lease ended, its partitions move');
      await withDeadline(this.options.leaseTtlMs, lease.result()).catch(() => undefined);
    } finally {
      await this.liveness.unlockPeer(peer).catch(() => undefined);
    }
  }
}
