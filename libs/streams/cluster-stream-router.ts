import type { EventFrame } from '@libs/frame';
import type { PresenceRow } from '@libs/storage';
import type { PeerChannels } from './peer-channels';
import type { PresenceReader } from './stream-presence';
import {
  combineOutcomes,
  eventByEvent,
  DeliverOptions,
  HubLoad,
  StreamDeliverer,
  StreamHub,
  StreamOutcome,
  StreamBatch,
  StreamPolicy,
  StreamTarget,
} from './stream-hub';

/** How long the router waits before looking again when no holder has a client, or none has room. */
const LOOK_AGAIN_MS = 250;

type Candidate = { local: true; load: number } | { local: false; load: number; row: PresenceRow };

/**
 * Delivers the events of a STREAM subscription to its clients wherever they are connected, for the instance
 * that dispatches it (a partition's owner in PARTITION_OWNED_PULL, the instance it is pinned to in
 * LOCAL_STICKY_PULL). The holders are this process's hub and the gateway processes `stream_presence` names
 * (stream-presence.ts); a remote holder is reached over the internal channel (peer-channels.ts), which hands the
 * delivery to that process's hub. LOAD_BALANCE: one holder with room, the least loaded by deliveries held over
 * the clients' windows (this process first on a tie). BROADCAST and MULTICAST: every holder, each delivering to
 * all its clients (MULTICAST filtering there, on the clients' own filters), the answers combined as one hub
 * combines its clients'. Nobody connected anywhere: it waits, like the hub, until a client comes or the signal
 * aborts. Frames go over the channel only, never through Temporal.
 */
export class ClusterStreamRouter implements StreamDeliverer {
  private cursor = 0;

  constructor(
    private readonly hub: StreamHub,
    private readonly presence: PresenceReader,
    private readonly peers: PeerChannels,
    /** This process's holder id: its own rows are its hub. */
    private readonly self: string,
  ) {}

  /**
   * LOAD_BALANCE with the holders known from memory, none of them another process, and a client with room here: the
   * hub's own delivery, without a promise of the router's around it (the common case of a lane's many deliveries to
   * the clients of one process). Otherwise the router's way, which reads the holders and may wait.
   */
  deliver(
    target: StreamTarget,
    frame: EventFrame,
    signal?: AbortSignal,
    options: DeliverOptions = {},
  ): Promise<StreamOutcome> {
    const policy = (target.config as { policy?: StreamPolicy }).policy ?? 'LOAD_BALANCE';
    if (policy === 'LOAD_BALANCE' && !signal?.aborted && this.onlyHere(target)) {
      const now = this.hub.deliverNow(target, frame, signal, { epoch: options.epoch ?? 0, onlyIfConnected: true });
      if (now) return now;
    }
    return this.route(target, frame, policy, signal, options);
  }

  /**
   * A batch as one delivery to a client here that takes batches, when no holder is another process (known from
   * memory, as {@link deliver}'s fast path, or read); otherwise event by event, each the router's way (a holder in
   * another process takes a batched subscription's events one by one), the answers combined. With nobody connected
   * anywhere, the batch waits for a client as one.
   */
  deliverBatch(
    target: StreamTarget,
    batch: StreamBatch,
    signal?: AbortSignal,
    options: DeliverOptions = {},
  ): Promise<StreamOutcome> {
    if (this.onlyHere(target) && !signal?.aborted) {
      const now = this.hub.deliverNow(target, batch, signal, { epoch: options.epoch ?? 0 });
      if (now) return now;
    }
    return this.routeBatch(target, batch, signal, options);
  }

  private async routeBatch(
    target: StreamTarget,
    batch: StreamBatch,
    signal: AbortSignal | undefined,
    options: DeliverOptions,
  ): Promise<StreamOutcome> {
    for (;;) {
      if (signal?.aborted) return { kind: 'gone' };
      const remote = (await this.presence.holdersOf(target.id)).some(this.reachableElsewhere);
      if (remote) return eventByEvent(batch, (frame) => this.deliver(target, frame, signal, options));
      if (this.hub.connected(target.id) > 0)
        return this.hub.deliverBatch(target, batch, signal, { epoch: options.epoch ?? 0, onlyIfConnected: true });
      // Nobody connected anywhere: the batch waits, once, as an event does.
      await this.lookAgain(signal);
    }
  }

  /** The holders of the subscription known from memory, and none of them another process that can be reached. */
  private onlyHere(target: StreamTarget): boolean {
    const known = this.presence.knownHoldersOf(target.id);
    return known !== undefined && !known.some(this.reachableElsewhere);
  }

  /** A holder that is another process, and that the channel can reach now. */
  private readonly reachableElsewhere = (r: PresenceRow): boolean =>
    r.holder !== this.self && this.peers.available(r.holder);

  private async route(
    target: StreamTarget,
    frame: EventFrame,
    policy: StreamPolicy,
    signal: AbortSignal | undefined,
    options: DeliverOptions,
  ): Promise<StreamOutcome> {
    const epoch = options.epoch ?? 0;
    const here = (): Promise<StreamOutcome> =>
      this.hub.deliver(target, frame, signal, { epoch, onlyIfConnected: true });
    const there = async (row: PresenceRow): Promise<StreamOutcome> => {
      const outcome = await this.peers.deliver(row, target, frame, epoch, signal);
      if (outcome.kind === 'gone') this.presence.forget(target.id);
      return outcome;
    };
    for (;;) {
      if (signal?.aborted) return { kind: 'gone' };
      const remote = (await this.presence.holdersOf(target.id)).filter(this.reachableElsewhere);
      const local = this.hub.load(target.id);
      if (policy === 'LOAD_BALANCE') {
        const pick = this.pickOne(target.id, local, remote);
        if (pick) return pick.local ? here() : there(pick.row);
      } else if (local.members > 0 || remote.length > 0) {
        return combineOutcomes(await Promise.all([...(local.members > 0 ? [here()] : []), ...remote.map(there)]));
      }
      await this.lookAgain(signal);
    }
  }

  /** The holder with room and the least load; undefined when nobody is connected or nobody has room. */
  private pickOne(subscriptionId: string, local: HubLoad, remote: PresenceRow[]): Candidate | undefined {
    const candidates: Candidate[] = [];
    if (local.members > 0 && local.held < local.window)
      candidates.push({ local: true, load: local.held / local.window });
    for (const row of remote) {
      const held = this.peers.inFlight(row.holder, subscriptionId);
      if (held < row.window) candidates.push({ local: false, load: held / row.window, row });
    }
    if (candidates.length === 0) return undefined;
    const least = Math.min(...candidates.map((c) => c.load));
    const best = candidates.filter((c) => c.load === least);
    const local0 = best.find((c) => c.local);
    if (local0) return local0;
    return best[this.cursor++ % best.length];
  }

  /** Waits a moment, or less: a client connecting here, or the signal aborting, ends it. */
  private lookAgain(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        unlisten();
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, LOOK_AGAIN_MS);
      const unlisten = this.hub.onMembership(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
