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

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
