import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * The home of a Mode 2 streaming session (libs/sessions/live-sessions.ts): the gateway process that orders its
 * publications, keeps its last ones and fans them out. Claimed by the first process that needs it, renewed about
 * every second while the session lives; a home not renewed within a few seconds is taken over by the next process
 * that needs it, with the epoch one higher (its positions start again: a subscriber that held the old epoch is told
 * it was not recovered).
 */
@Entity({ name: 'session_homes' })
@Index('session_homes_renewed_idx', ['renewedAt'])
export class SessionHomeEntity {
  @PrimaryColumn({ type: 'text' })
  tenant!: string;

  @PrimaryColumn({ type: 'text' })
  name!: string;

  @Column({ type: 'text' })
  holder!: string;

  @Column({ name: 'instance_id', type: 'text' })
  instanceId!: string;

  @Column({ type: 'text' })
  address!: string;

  @Column({ type: 'integer' })
  epoch!: number;

  @Column({ name: 'renewed_at', type: 'timestamptz', default: () => 'now()' })
  renewedAt!: Date;
}
