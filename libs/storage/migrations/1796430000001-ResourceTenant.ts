import { MigrationInterface, QueryRunner } from 'typeorm';

export class ResourceTenant1796430000001 implements MigrationInterface {
  name = 'ResourceTenant1796430000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_tasks" ADD "tenant" text NOT NULL DEFAULT 'default'`);
    await queryRunner.query(`ALTER TABLE "subscriptions" ADD "tenant" text NOT NULL DEFAULT 'default'`);
    await queryRunner.query(`ALTER TABLE "dead_letters" ADD "tenant" text NOT NULL DEFAULT 'default'`);
    await queryRunner.query(`ALTER TABLE "delivery_retries" ADD "tenant" text NOT NULL DEFAULT 'default'`);
    await queryRunner.query(`ALTER TABLE "pending_requests" ADD "tenant" text NOT NULL DEFAULT 'default'`);
    await queryRunner.query(`CREATE INDEX "a2a_tasks_tenant_context_idx" ON "a2a_tasks" ("tenant", "context_id") `);
    await queryRunner.query(
      `CREATE INDEX "subscriptions_tenant_created_idx" ON "subscriptions" ("tenant", "created_at") `,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."subscriptions_tenant_created_idx"`);
    await queryRunner.query(`DROP INDEX "public"."a2a_tasks_tenant_context_idx"`);
    await queryRunner.query(`ALTER TABLE "pending_requests" DROP COLUMN "tenant"`);
    await queryRunner.query(`ALTER TABLE "delivery_retries" DROP COLUMN "tenant"`);
    await queryRunner.query(`ALTER TABLE "dead_letters" DROP COLUMN "tenant"`);
    await queryRunner.query(`ALTER TABLE "subscriptions" DROP COLUMN "tenant"`);
    await queryRunner.query(`ALTER TABLE "a2a_tasks" DROP COLUMN "tenant"`);
  }
}
