import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * The stream clients one gateway process holds for one subscription (libs/streams/stream-presence.ts): how many,
 * their windows added up, and the internal address the dispatching instance reaches that process at. The process
 * rewrites its rows about every second while it holds clients and deletes a row when its last client of that
 * subscription leaves; a row not rewritten for a few seconds is of a dead process and is ignored, then deleted.
 */
@Entity({ name: 'stream_presence' })
@Index('stream_presence_renewed_idx', ['renewedAt'])
export class StreamPresenceEntity {
  @PrimaryColumn({ name: 'subscription_id', type: 'uuid' })
  subscriptionId!: string;

  /** The holding process: `<instance id>/<pid>` (several gateway processes of one instance share its id). */
  @PrimaryColumn({ type: 'text' })
  holder!: string;

  @Column({ name: 'instance_id', type: 'text' })
  instanceId!: string;

  /** Where the holder's internal channel listens (EVENTMESH_INSTANCE_ADVERTISED_URL, or derived at boot). */
  @Column({ type: 'text' })
  address!: string;

  @Column({ type: 'integer' })
  members!: number;

  /** The members' windows added up: most deliveries the holder takes unanswered for the subscription. */
  @Column({ type: 'integer' })
  window!: number;

  /** Each client: id, transport, window, deliveries in flight, and since when (StreamClientView, libs/streams/stream-hub.ts). */
  @Column({ type: 'jsonb', default: () => "'[]'" })
  clients!: object[];

  @Column({ name: 'renewed_at', type: 'timestamptz', default: () => 'now()' })
  renewedAt!: Date;
}
