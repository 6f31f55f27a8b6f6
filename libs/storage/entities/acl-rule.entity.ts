import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * One ACL rule of a tenant (libs/security/acl-rules.ts says what each column means). The columns are plain text
 * on purpose: a rule written by hand or by an older version may be malformed, and the gate must see it, log it
 * and deny what it concerns rather than fail to load.
 */
@Entity({ name: 'acl_rules' })
@Index('acl_rules_tenant_idx', ['tenant'])
export class AclRuleEntity {
  @PrimaryColumn({ type: 'uuid' })
  id!: string;

  @Column({ type: 'text' })
  tenant!: string;

  /** `principal:<name>`, `principal:*` or `tenant:*`. */
  @Column({ type: 'text' })
  subject!: string;

  /** `publish`, `subscribe`, `admin` or `*`. */
  @Column({ type: 'text' })
  action!: string;

  /** A topic, or a pattern with `*` (any run of characters) and `?` (one character). */
  @Column({ type: 'text' })
  topic!: string;

  /** `ALLOW` or `DENY`. */
  @Column({ type: 'text' })
  effect!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}
