import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

/**
 * The version of a gate policy every instance holds in memory (`acl_rules`, `tenant_quotas`): bumped in the same
 * transaction as every change of the policy, so an instance that polls it (one cheap query) reloads the policy
 * exactly when it changed, and never misses a change.
 */
@Entity({ name: 'gate_policy_versions' })
export class GatePolicyVersionEntity {
  @PrimaryColumn({ type: 'text' })
  policy!: string;

  @Column({ type: 'bigint', default: 0, transformer: bigintAsNumber })
  version!: number;

  @Column({ name: 'changed_at', type: 'timestamptz', default: () => 'now()' })
  changedAt!: Date;
}
