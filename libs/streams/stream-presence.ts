import { hostname } from 'node:os';
import { createLogger } from '@libs/logging';
import { CoalescingRenewal, RecentReads } from '@libs/runtime';
import type { HolderEpoch, PresenceRow, StreamPresenceStore } from '@libs/storage';
import type { StreamHub } from './stream-hub';

/** How often a holder renews its rows while it holds clients. */
export const PRESENCE_RENEW_MS = 1000;
/** A row not renewed within this is of a dead process: readers ignore it. */
export const PRESENCE_FRESH_MS = 5000;
/** Rows older than this are deleted (by any holder). */
const PRESENCE_EXPIRE_MS = 60_000;
/** How long a reader trusts what it read of a subscription's holders. */
const READ_MEMORY_MS = 500;

/** This process's holder id: several gateway processes of one instance (EVENTMESH_HTTP_PROCESSES) share its id. */
export function holderIdOf(instanceId: string, pid = process.pid): string {
  return `${instanceId}/${pid}`;
}

/** The address other instances reach this gateway at, when EVENTMESH_INSTANCE_ADVERTISED_URL does not say. */
export function derivedAddress(listenHost: string, port: number): string {
  const host = listenHost === '0.0.0.0' || listenHost === '::' ? hostname() : listenHost;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * A gateway process's stream clients, published in `stream_presence` for the instances that dispatch their
 * subscriptions: at once on a connect or a last disconnect, and renewed every {@link PRESENCE_RENEW_MS} while
 * clients stay. A failed write is retried at the next renewal (a reader sees the row a little later, or a stale
 * row a little longer: a delivery to a holder with no client is `gone` at once, and goes elsewhere). Its writes are
 * fenced by the epoch it claims for its holder id (presence-holder.entity.ts): once a newer process bears the id, a
 * renewal of this one is refused, overwrites nothing, and it stops writing.
 */
export class StreamPresence {
  private readonly log = createLogger('StreamPresence');
  private readonly renewal = new CoalescingRenewal('stream presence rows', PRESENCE_RENEW_MS, () => this.write());
  private unlisten?: () => void;
  private published = new Set<string>();
  private renewals = 0;
  /** The epoch this process claimed for its holder id, at its first write. */
  private claimed?: HolderEpoch;
  /** Set when a renewal was refused: another process bears the holder id now, and this one writes no more. */
  private fenced = false;

  constructor(
    private readonly store: StreamPresenceStore,
    private readonly hub: StreamHub,
    private readonly me: { holder: string; instanceId: string; address: string },
  ) {}

  /** Whether a renewal was refused: a newer process bears the holder id, and this one writes no more. */
  get stale(): boolean {
    return this.fenced;
  }

  start(): void {
    this.unlisten = this.hub.onMembership(() => this.renewal.renew());
    this.renewal.start();
  }

  /** Stops renewing and deletes this holder's rows (a clean shutdown: owners stop sending here now). */
  async close(): Promise<void> {
    this.unlisten?.();
    await this.renewal.close();
    if (!this.claimed) return;
    await this.store
      .remove(this.claimed)
      .catch((e: Error) => this.log.warn({ error: e.message }, 'cannot delete the stream presence rows'));
  }

  private async write(): Promise<void> {
    const held = this.hub.subscriptions();
    const rows = held
      .map((subscriptionId) => ({
        subscriptionId,
        ...this.hub.load(subscriptionId),
        clients: this.hub.clients(subscriptionId),
      }))
      .filter((r) => r.members > 0);
    const left = [...this.published].filter((id) => !rows.some((r) => r.subscriptionId === id));
    this.claimed ??= await this.store.claim(this.me.holder);
    await this.store.remove(this.claimed, left);
    if (!(await this.store.renew(this.claimed, this.me.instanceId, this.me.address, rows))) {
      this.fenced = true;
      this.renewal.stop();
      this.log.warn(
        { holder: this.me.holder, epoch: this.claimed.epoch },
        'another process bears this holder id now (a newer epoch); its stream presence is no longer written here',
      );
      return;
    }
    this.published = new Set(rows.map((r) => r.subscriptionId));
    if (++this.renewals % 30 === 0) await this.store.expire(PRESENCE_EXPIRE_MS);
  }
}

/** The holders of a subscription as the dispatching side reads them: fresh rows, remembered for a moment. */
export class PresenceReader {
  private readonly reads: RecentReads<PresenceRow[]>;

  constructor(store: StreamPresenceStore) {
    this.reads = new RecentReads((id) => store.holdersOf(id, PRESENCE_FRESH_MS), READ_MEMORY_MS, []);
  }

  holdersOf(subscriptionId: string): Promise<PresenceRow[]> {
    return this.reads.get(subscriptionId);
  }

  /** What `holdersOf` would answer at once, when it answers from memory (undefined when it would read). */
  knownHoldersOf(subscriptionId: string): PresenceRow[] | undefined {
    return this.reads.peek(subscriptionId);
  }

  /** Forgets what it read of a subscription (a holder answered that its clients left). */
  forget(subscriptionId: string): void {
    this.reads.forget(subscriptionId);
  }
}
