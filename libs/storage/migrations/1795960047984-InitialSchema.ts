import { MigrationInterface, QueryRunner } from 'typeorm';

export class InitialSchema1795960047984 implements MigrationInterface {
  name = 'InitialSchema1795960047984';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "a2a_tasks" ("id" text NOT NULL, "context_id" text NOT NULL, "state" text NOT NULL, "history" jsonb NOT NULL DEFAULT '[]'::jsonb, "artifacts" jsonb NOT NULL DEFAULT '[]'::jsonb, "metadata" jsonb NOT NULL DEFAULT '{}'::jsonb, "version" integer NOT NULL DEFAULT '0', "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_ccfa35bad9776a90b7cda1d25a2" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(`CREATE INDEX "a2a_tasks_context_idx" ON "a2a_tasks" ("context_id") `);
    await queryRunner.query(
      `CREATE TABLE "dead_letters" ("id" BIGSERIAL NOT NULL, "subscription_id" uuid NOT NULL, "topic" text NOT NULL, "partition" integer NOT NULL, "kafka_offset" bigint NOT NULL, "event_id" text NOT NULL, "attributes" jsonb NOT NULL, "data" bytea, "attempts" integer NOT NULL, "last_error" text NOT NULL, "first_failed_at" TIMESTAMP WITH TIME ZONE NOT NULL, "last_failed_at" TIMESTAMP WITH TIME ZONE NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_084e63809483fb0a9c48aae607f" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "dead_letters_subscription_idx" ON "dead_letters" ("subscription_id", "created_at") `,
    );
    await queryRunner.query(
      `CREATE TABLE "partition_leases" ("topic" text NOT NULL, "partition" integer NOT NULL, "owner" text, "epoch" bigint NOT NULL DEFAULT '0', "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_7e7df7eebf5b60161f0da12a686" PRIMARY KEY ("topic", "partition"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "subscriptions" ("id" uuid NOT NULL, "topic" text NOT NULL, "protocol" text NOT NULL, "sink" text NOT NULL, "filters" jsonb NOT NULL DEFAULT '[]'::jsonb, "config" jsonb NOT NULL DEFAULT '{}'::jsonb, "instance_id" text NOT NULL, "status" text NOT NULL DEFAULT 'ACTIVE', "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_a87248d73155605cf782be9ee5e" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "subscriptions_instance_status_idx" ON "subscriptions" ("instance_id", "status") `,
    );
    await queryRunner.query(
      `CREATE TABLE "subscription_offsets" ("subscription_id" uuid NOT NULL, "topic" text NOT NULL, "partition" integer NOT NULL, "next_offset" bigint NOT NULL, "epoch" bigint NOT NULL DEFAULT '0', "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_0f2e7f6f5cdc6d32b8bfe97891f" PRIMARY KEY ("subscription_id", "topic", "partition"))`,
    );
    await queryRunner.query(
      `ALTER TABLE "subscription_offsets" ADD CONSTRAINT "FK_4587c0d5c4bca006d292b269e02" FOREIGN KEY ("subscription_id") REFERENCES "subscriptions"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "subscription_offsets" DROP CONSTRAINT "FK_4587c0d5c4bca006d292b269e02"`);
    await queryRunner.query(`DROP TABLE "subscription_offsets"`);
    await queryRunner.query(`DROP INDEX "public"."subscriptions_instance_status_idx"`);
    await queryRunner.query(`DROP TABLE "subscriptions"`);
    await queryRunner.query(`DROP TABLE "partition_leases"`);
    await queryRunner.query(`DROP INDEX "public"."dead_letters_subscription_idx"`);
    await queryRunner.query(`DROP TABLE "dead_letters"`);
    await queryRunner.query(`DROP INDEX "public"."a2a_tasks_context_idx"`);
    await queryRunner.query(`DROP TABLE "a2a_tasks"`);
  }
}
