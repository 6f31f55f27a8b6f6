import type { DataSource } from 'typeorm';
import { claimHolderEpoch, holdsEpoch, type HolderEpoch } from './presence-holders';

/** One client in a presence row (libs/streams/stream-hub.ts StreamClientView). */
export interface PresenceClient {
  clientId: string;
  transport: 'websocket' | 'sse' | 'long-poll';
  window: number;
  inFlight: number;
  since: string;
}

/** The stream clients one gateway process holds for one subscription. */
export interface PresenceRow {
  subscriptionId: string;
  /** The holding process, `<instance id>/<pid>`. */
  holder: string;
  instanceId: string;
  /** Where the holder's internal stream channel listens. */
  address: string;
  members: number;
  /** The members' windows added up. */
  window: number;
}

/**
 * The `stream_presence` table (entities/stream-presence.entity.ts): which gateway processes hold stream clients
 * of which subscription. Each holder rewrites its own rows (`renew`) and deletes a row its last client left
 * (`remove`); a row older than the reader's `freshMs`, by the database's clock (the one clock every instance
 * shares), is of a process that died and counts for nothing; `expire` deletes such rows.
 */
export class StreamPresenceStore {
  constructor(private readonly db: DataSource) {}

  /**
   * Claims the next epoch of a holder id (presence-holder.entity.ts): from now on only writes under it are taken,
   * and those of any process that bore the id before are refused.
   */
  async claim(holder: string): Promise<HolderEpoch> {
    return { holder, epoch: await claimHolderEpoch(this.db, holder) };
  }

  /**
   * Writes (or rewrites, renewing them) this holder's rows, one statement for all its subscriptions, while its epoch
   * is the holder id's: false, nothing written, once another process claimed the id (a stale holder); true when
   * there was nothing to write.
   */
  async renew(
    { holder, epoch }: HolderEpoch,
    instanceId: string,
    address: string,
    rows: readonly { subscriptionId: string; members: number; window: number; clients?: readonly PresenceClient[] }[],
  ): Promise<boolean> {
    if (rows.length === 0) return true;
    const written: unknown[] = await this.db.query(
      `INSERT INTO stream_presence (subscription_id, holder, instance_id, address, members, "window", clients, renewed_at)
       SELECT r.subscription_id, $1, $2, $3, r.members, r.win, r.clients, now()
         FROM unnest($4::uuid[], $5::int[], $6::int[], $7::jsonb[]) AS r(subscription_id, members, win, clients)
        WHERE ${holdsEpoch('$1', '$8')}
       ON CONFLICT (subscription_id, holder) DO UPDATE SET instance_id = EXCLUDED.instance_id, address = EXCLUDED.address,
         members = EXCLUDED.members, "window" = EXCLUDED."window", clients = EXCLUDED.clients, renewed_at = now()
       RETURNING 1`,
      [
        holder,
        instanceId,
        address,
        rows.map((r) => r.subscriptionId),
        rows.map((r) => r.members),
        rows.map((r) => r.window),
        rows.map((r) => JSON.stringify(r.clients ?? [])),
        epoch,
      ],
    );
    return written.length > 0;
  }

  /** The fresh rows of a subscription with their clients: renewed within `freshMs`. */
  async clientsOf(subscriptionId: string, freshMs: number): Promise<(PresenceRow & { clients: PresenceClient[] })[]> {
    const rows: {
      holder: string;
      instance_id: string;
      address: string;
      members: number;
      window: number;
      clients: PresenceClient[];
    }[] = await this.db.query(
      `SELECT holder, instance_id, address, members, "window", clients FROM stream_presence
        WHERE subscription_id = $1 AND renewed_at > now() - make_interval(secs => $2::float8 / 1000)`,
      [subscriptionId, freshMs],
    );
    return rows.map((r) => ({
      subscriptionId,
      holder: r.holder,
      instanceId: r.instance_id,
      address: r.address,
      members: r.members,
      window: r.window,
      clients: r.clients,
    }));
  }

  /**
   * Deletes this holder's rows of `subscriptionIds` (their last client left), or all of its rows (a clean shutdown),
   * while its epoch is the holder id's: a stale holder deletes nothing of the process that took the id over.
   */
  async remove({ holder, epoch }: HolderEpoch, subscriptionIds?: readonly string[]): Promise<void> {
    if (subscriptionIds?.length === 0) return;
    await this.db.query(
      `DELETE FROM stream_presence WHERE holder = $1 AND ($3::uuid[] IS NULL OR subscription_id = ANY($3::uuid[]))
         AND ${holdsEpoch('$1', '$2')}`,
      [holder, epoch, subscriptionIds ?? null],
    );
  }

  /** The fresh rows of a subscription: renewed within `freshMs`. */
  async holdersOf(subscriptionId: string, freshMs: number): Promise<PresenceRow[]> {
    const rows: { holder: string; instance_id: string; address: string; members: number; window: number }[] =
      await this.db.query(
        `SELECT holder, instance_id, address, members, "window" FROM stream_presence
        WHERE subscription_id = $1 AND renewed_at > now() - make_interval(secs => $2::float8 / 1000)`,
        [subscriptionId, freshMs],
      );
    return rows.map((r) => ({
      subscriptionId,
      holder: r.holder,
      instanceId: r.instance_id,
      address: r.address,
      members: r.members,
      window: r.window,
    }));
  }

  /** Deletes rows not renewed for `olderThanMs`; returns how many. */
  async expire(olderThanMs: number): Promise<number> {
    const [, deleted]: [unknown, number] = await this.db.query(
      `DELETE FROM stream_presence WHERE renewed_at < now() - make_interval(secs => $1::float8 / 1000)`,
      [olderThanMs],
    );
    return deleted;
  }
}
