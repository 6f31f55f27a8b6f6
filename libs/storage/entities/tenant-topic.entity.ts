import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

/**
 * A tenant's own topic (`POST /topics`): its short name is the tenant's, its Kafka topic `tenant.<tenant>.<name>`
 * (libs/kafka/tenant-topic.ts). `ready` once the Kafka topic exists: a name is resolved only then, so nothing is
 * published to a topic Kafka does not have yet, or no longer has.
 */
@Entity({ name: 'tenant_topics' })
export class TenantTopicEntity {
  @PrimaryColumn({ type: 'text' })
  tenant!: string;

  @PrimaryColumn({ type: 'text' })
  name!: string;

  @Column({ type: 'integer' })
  partitions!: number;

  @Column({ name: 'retention_ms', type: 'bigint', nullable: true, transformer: bigintAsNumber })
  retentionMs!: number | null;

  @Column({ type: 'boolean', default: false })
  ready!: boolean;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}
