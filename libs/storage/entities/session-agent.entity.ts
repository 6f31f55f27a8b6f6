import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * One replica of a streaming-session agent (libs/sessions/agent-presence.ts): a client connection serving an agent
 * name of a tenant, the gateway process holding it, and the internal address other instances reach that process at
 * to open sessions on it. The process rewrites its rows about every second and deletes a replica's row when it
 * stops serving; a row not rewritten for a few seconds is of a dead process and is ignored, then deleted.
 */
@Entity({ name: 'session_agents' })
@Index('session_agents_name_idx', ['tenant', 'agent'])
@Index('session_agents_renewed_idx', ['renewedAt'])
export class SessionAgentEntity {
  @PrimaryColumn({ name: 'replica_id', type: 'text' })
  replicaId!: string;

  @Column({ type: 'text' })
  tenant!: string;

  @Column({ type: 'text' })
  agent!: string;

  /** The holding process: `<instance id>/<pid>`. */
  @Column({ type: 'text' })
  holder!: string;

  @Column({ name: 'instance_id', type: 'text' })
  instanceId!: string;

  /** Where the holder's internal sessions link listens. */
  @Column({ type: 'text' })
  address!: string;

  /** Sessions open on the replica at the last renewal. */
  @Column({ type: 'integer' })
  sessions!: number;

  /** What an operator sees of the replica: bytes, stalls, and its open sessions (bounded), at the last renewal. */
  @Column({ type: 'jsonb', default: () => "'{}'" })
  stats!: object;

  @Column({ type: 'timestamptz' })
  since!: Date;

  @Column({ name: 'renewed_at', type: 'timestamptz', default: () => 'now()' })
  renewedAt!: Date;
}
