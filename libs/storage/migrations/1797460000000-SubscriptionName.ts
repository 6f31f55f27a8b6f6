import { MigrationInterface, QueryRunner } from 'typeorm';

/** A subscription's optional name, unique within its tenant: the key a client ensures it by. */
export class SubscriptionName1797460000000 implements MigrationInterface {
  name = 'SubscriptionName1797460000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "subscriptions" ADD "name" text`);
    await queryRunner.query(
      `CREATE UNIQUE INDEX "subscriptions_tenant_name_key" ON "subscriptions" ("tenant", "name") WHERE name IS NOT NULL`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."subscriptions_tenant_name_key"`);
    await queryRunner.query(`ALTER TABLE "subscriptions" DROP COLUMN "name"`);
  }
}
