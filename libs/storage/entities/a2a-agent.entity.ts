import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * An agent registered with the A2A broker (libs/a2a): its name within its tenant and the agent card it registered
 * (validated; its interfaces are where the mesh calls it). Another tenant never sees it.
 */
@Entity({ name: 'a2a_agents' })
export class A2AAgentEntity {
  @PrimaryColumn({ type: 'text' })
  tenant!: string;

  @PrimaryColumn({ type: 'text' })
  name!: string;

  /** The agent card as registered (A2A v1.0 JSON). */
  @Column({ type: 'jsonb' })
  card!: Record<string, unknown>;

  /** How the agent takes its tasks: `url` (the mesh calls its A2A server) or `subscriber` (its subscription on its request topic). */
  @Column({ type: 'text', default: 'url' })
  style!: string;

  /** A subscriber agent's last liveness heartbeat (its registration is one); its card expires without a recent one. */
  @Column({ name: 'heartbeat_at', type: 'timestamptz', nullable: true })
  heartbeatAt!: Date | null;

  /**
   * The agent's registration, counted from 1: each PUT of the agent takes the next, and a heartbeat that names an
   * older one (a replica of a replaced registration) is refused and writes nothing.
   */
  @Column({ type: 'integer', default: 1 })
  registration!: number;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
