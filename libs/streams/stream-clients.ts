import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import type { StreamPresenceStore } from '@libs/storage';
import type { PeerChannels } from './peer-channels';
import { PresenceReader, PRESENCE_FRESH_MS } from './stream-presence';
import type { ClientAction, StreamClientView, StreamHub } from './stream-hub';

/** A connected stream client as an operator sees it: where it is held, and its flow-control state. */
export interface ClusterClientView extends StreamClientView {
  /** The instance whose gateway holds the connection. */
  instance: string;
  /** The gateway process that holds it, `<instance id>/<pid>`. */
  holder: string;
}

export interface DisconnectView {
  subscriptionId: string;
  clientId: string;
  instance: string;
  disconnected: true;
}

/**
 * The stream clients of a subscription across the cluster, for operators: this process's own from its hub (live),
 * the other gateway processes' from `stream_presence` (each renews its clients' list every second, so their
 * in-flight counts are up to a second old), and disconnecting one wherever it is held: here through the hub, on
 * another process over the internal stream channel (cluster-channel.ts, a `disconnect` message), whose holder
 * closes the connection the same way. A disconnected client's unanswered deliveries are `gone` and delivered
 * again, to it if it reconnects or to another client, as when it leaves by itself. And a client's answer for a
 * delivery, wherever it is posted: to this process's hub when it holds the delivery, else to the processes that hold
 * clients of the subscription, over the same channel (a `settle` message), so an SSE or long-poll client behind a
 * load balancer may post its acks to any instance.
 */
export class StreamClients {
  private readonly log = createLogger('StreamClients');

  constructor(
    private readonly hub: StreamHub,
    private readonly presence: StreamPresenceStore,
    private readonly peers: PeerChannels,
    private readonly me: { holder: string; instanceId: string },
  ) {
    this.holders = new PresenceReader(presence);
  }

  /** The holders of a subscription, read as the dispatching side reads them (remembered for a moment). */
  private readonly holders: PresenceReader;

  async list(subscriptionId: string): Promise<ClusterClientView[]> {
    const local = this.hub
      .clients(subscriptionId)
      .map((c) => ({ ...c, instance: this.me.instanceId, holder: this.me.holder }));
    const rows = await this.presence.clientsOf(subscriptionId, PRESENCE_FRESH_MS);
    const remote = rows
      .filter((r) => r.holder !== this.me.holder)
      .flatMap((r) => r.clients.map((c) => ({ ...c, instance: r.instanceId, holder: r.holder })));
    return [...local, ...remote].sort((a, b) => a.since.localeCompare(b.since) || a.clientId.localeCompare(b.clientId));
  }

  /** Disconnects the client wherever it is held; 404 NOT_FOUND when no gateway process holds it. */
  async disconnect(subscriptionId: string, clientId: string, actor: string): Promise<DisconnectView> {
    if (this.hub.kick(subscriptionId, clientId)) return this.done(subscriptionId, clientId, this.me.instanceId, actor);
    const rows = await this.presence.clientsOf(subscriptionId, PRESENCE_FRESH_MS);
    for (const row of rows) {
      if (row.holder === this.me.holder || !row.clients.some((c) => c.clientId === clientId)) continue;
      if (await this.peers.disconnect({ holder: row.holder, address: row.address }, subscriptionId, clientId)) {
        return this.done(subscriptionId, clientId, row.instanceId, actor);
      }
    }
    throw new EventMeshError(
      ErrorCode.NotFound,
      `no stream client ${clientId} of subscription ${subscriptionId} is connected`,
      { subscriptionId, clientId },
    );
  }

  /**
   * Settles the delivery with a client's answer wherever it is held: here, or on another gateway process holding
   * clients of the subscription (asked together; delivery ids are unique to the process that made them, so at most
   * one settles it). False when none holds it: unknown, stale (settled already, timed out, its client gone), or held
   * by a process that cannot be reached.
   */
  async answer(subscriptionId: string, deliveryId: string, outcome: ClientAction): Promise<boolean> {
    if (this.hub.subscriptionOf(deliveryId) !== undefined) return this.hub.act(subscriptionId, deliveryId, outcome);
    // The holders as the dispatching side reads them (remembered for a moment): no query per answer.
    const rows = (await this.holders.holdersOf(subscriptionId)).filter(
      (r) => r.holder !== this.me.holder && r.members > 0,
    );
    const settled = await Promise.all(
      rows.map((r) => this.peers.settle({ holder: r.holder, address: r.address }, subscriptionId, deliveryId, outcome)),
    );
    return settled.includes(true);
  }

  private done(subscriptionId: string, clientId: string, instance: string, actor: string): DisconnectView {
    this.log.info(
      { subscription: subscriptionId, client: clientId, instance, actor },
      'stream client disconnected by an operator',
    );
    return { subscriptionId, clientId, instance, disconnected: true };
  }
}
