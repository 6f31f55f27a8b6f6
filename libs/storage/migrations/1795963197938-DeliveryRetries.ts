import { MigrationInterface, QueryRunner } from 'typeorm';

export class DeliveryRetries1795963197938 implements MigrationInterface {
  name = 'DeliveryRetries1795963197938';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "delivery_retries" ("subscription_id" uuid NOT NULL, "topic" text NOT NULL, "partition" integer NOT NULL, "kafka_offset" bigint NOT NULL, "attributes" jsonb NOT NULL, "data" bytea, "attempts" integer NOT NULL, "last_error" text NOT NULL, "first_failed_at" TIMESTAMP WITH TIME ZONE NOT NULL, "next_attempt_at" TIMESTAMP WITH TIME ZONE NOT NULL, "epoch" bigint NOT NULL DEFAULT '0', CONSTRAINT "PK_2b8c29d25beec81622167c05c61" PRIMARY KEY ("subscription_id", "topic", "partition", "kafka_offset"))`,
    );
    await queryRunner.query(`CREATE INDEX "delivery_retries_due_idx" ON "delivery_retries" ("next_attempt_at") `);
    await queryRunner.query(
      `ALTER TABLE "delivery_retries" ADD CONSTRAINT "FK_944200cd5060ae0eeb780430b31" FOREIGN KEY ("subscription_id") REFERENCES "subscriptions"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "delivery_retries" DROP CONSTRAINT "FK_944200cd5060ae0eeb780430b31"`);
    await queryRunner.query(`DROP INDEX "public"."delivery_retries_due_idx"`);
    await queryRunner.query(`DROP TABLE "delivery_retries"`);
  }
}
