import { MigrationInterface, QueryRunner } from 'typeorm';

export class GateAclQuota1796420000001 implements MigrationInterface {
  name = 'GateAclQuota1796420000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "acl_rules" ("id" uuid NOT NULL, "tenant" text NOT NULL, "subject" text NOT NULL, "action" text NOT NULL, "topic" text NOT NULL, "effect" text NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_3b1b8895cc52a30233c51c34cd1" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(`CREATE INDEX "acl_rules_tenant_idx" ON "acl_rules" ("tenant") `);
    await queryRunner.query(
      `CREATE TABLE "gate_policy_versions" ("policy" text NOT NULL, "version" bigint NOT NULL DEFAULT '0', "changed_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_5d1e76a31bda5751ee2b18d264a" PRIMARY KEY ("policy"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "quota_usage" ("tenant" text NOT NULL, "instance_id" text NOT NULL, "events_demand" double precision NOT NULL DEFAULT '0', "bytes_demand" double precision NOT NULL DEFAULT '0', "streams" integer NOT NULL DEFAULT '0', "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_e6ad33db24c2df3538e8c208ed6" PRIMARY KEY ("tenant", "instance_id"))`,
    );
    await queryRunner.query(`CREATE INDEX "quota_usage_updated_idx" ON "quota_usage" ("updated_at") `);
    await queryRunner.query(
      `CREATE TABLE "tenant_quotas" ("tenant" text NOT NULL, "events_per_second" integer, "bytes_per_second" bigint, "burst_seconds" integer, "stream_connections" integer, "subscriptions" integer, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_cefc79ac7604774d5f6e67d6c81" PRIMARY KEY ("tenant"))`,
    );
    // Every change of a gate policy's table, whoever makes it (the admin API, or SQL by hand), bumps the
    // policy's version in the same transaction: what every instance polls to reload the policy.
    await queryRunner.query(`CREATE FUNCTION "gate_policy_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              INSERT INTO gate_policy_versions (policy, version, changed_at) VALUES (TG_TABLE_NAME, 1, now())
              ON CONFLICT (policy) DO UPDATE SET version = gate_policy_versions.version + 1, changed_at = now();
              RETURN NULL;
            END $$`);
    await queryRunner.query(
      `CREATE TRIGGER "acl_rules_changed" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "acl_rules" FOR EACH STATEMENT EXECUTE FUNCTION "gate_policy_changed"()`,
    );
    await queryRunner.query(
      `CREATE TRIGGER "tenant_quotas_changed" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "tenant_quotas" FOR EACH STATEMENT EXECUTE FUNCTION "gate_policy_changed"()`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER "tenant_quotas_changed" ON "tenant_quotas"`);
    await queryRunner.query(`DROP TRIGGER "acl_rules_changed" ON "acl_rules"`);
    await queryRunner.query(`DROP FUNCTION "gate_policy_changed"()`);
    await queryRunner.query(`DROP TABLE "tenant_quotas"`);
    await queryRunner.query(`DROP INDEX "public"."quota_usage_updated_idx"`);
    await queryRunner.query(`DROP TABLE "quota_usage"`);
    await queryRunner.query(`DROP TABLE "gate_policy_versions"`);
    await queryRunner.query(`DROP INDEX "public"."acl_rules_tenant_idx"`);
    await queryRunner.query(`DROP TABLE "acl_rules"`);
  }
}
