import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * The operator's grant to a tenant to publish to, or subscribe to, one shared topic (`/admin/topics/{topic}/grants`),
 * what EVENTMESH_KAFKA_SHARED_TOPIC_ACCESS=GRANTED asks of every tenant but the operator's.
 */
@Entity({ name: 'topic_grants' })
export class TopicGrantEntity {
  @PrimaryColumn({ type: 'text' })
  topic!: string;

  @PrimaryColumn({ type: 'text' })
  tenant!: string;

  /** `publish` or `subscribe`. */
  @PrimaryColumn({ type: 'text' })
  action!: string;

  /** The principal of the operator who granted it. */
  @Column({ name: 'granted_by', type: 'text' })
  grantedBy!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}
