import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

/** A subscription: where events of a topic go, and how. Shape follows the CloudEvents Subscriptions API. */
@Entity({ name: 'subscriptions' })
@Index('subscriptions_instance_status_idx', ['instanceId', 'status'])
@Index('subscriptions_tenant_created_idx', ['tenant', 'createdAt'])
@Index('subscriptions_tenant_name_key', ['tenant', 'name'], { unique: true, where: 'name IS NOT NULL' })
export class SubscriptionEntity {
  @PrimaryColumn({ type: 'uuid' })
  id!: string;

  /** The tenant that owns it: only that tenant's callers see or change it (another tenant gets 404). */
  @Column({ type: 'text', default: 'default' })
  tenant!: string;

  /**
   * The tenant's own key for it, unique within the tenant (null: unnamed). A client ensures a subscription by its
   * name (`PUT /subscriptions/by-name/{name}`): every process of an app, and every restart, gets the same one.
   */
  @Column({ type: 'text', nullable: true })
  name!: string | null;

  @Column({ type: 'text' })
  topic!: string;

  /** Delivery protocol: `HTTP` (webhook push). */
  @Column({ type: 'text' })
  protocol!: string;

  /** The webhook URL for `HTTP`. */
  @Column({ type: 'text' })
  sink!: string;

  @Column({ type: 'jsonb', default: () => "'[]'" })
  filters!: object[];

  @Column({ type: 'jsonb', default: () => "'{}'" })
  config!: Record<string, unknown>;

  /**
   * The Standard Webhooks secret (`whsec_...`) deliveries are signed with, sealed by the SecretBox
   * (`v1:<keyId>:<iv>:<ciphertext>`, libs/security/secret-box.ts); never stored in the clear.
   */
  @Column({ name: 'signing_secret', type: 'text', nullable: true })
  signingSecret!: string | null;

  /** The instance that dispatches this subscription in LOCAL_STICKY_PULL. */
  @Column({ name: 'instance_id', type: 'text' })
  instanceId!: string;

  /**
   * `ACTIVE`; `PAUSED` by an operator (delivery stops, offsets stay; libs/subscriptions/subscription-delivery-state.ts);
   * `DISABLED` after its sink answered 410 Gone. Only `ACTIVE` ones are dispatched.
   */
  @Column({ type: 'text', default: 'ACTIVE' })
  status!: string;

  /**
   * How many times an operator moved its offsets (a seek, libs/subscriptions/subscription-offsets.ts). A dispatch
   * loop's lane remembers the generation it started under, its commits carry it, and a commit under an older one
   * is refused (offset-store.ts): a lane that started before a seek never writes over it.
   */
  @Column({ name: 'offsets_generation', type: 'bigint', default: 0, transformer: bigintAsNumber })
  offsetsGeneration!: number;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
