import { MigrationInterface, QueryRunner } from 'typeorm';

export class SkippedRanges1796101139817 implements MigrationInterface {
  name = 'SkippedRanges1796101139817';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "skipped_ranges" ("subscription_id" uuid NOT NULL, "topic" text NOT NULL, "partition" integer NOT NULL, "from_offset" bigint NOT NULL, "to_offset" bigint NOT NULL, "reason" text NOT NULL, "epoch" bigint NOT NULL DEFAULT '0', "first_recorded_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "last_recorded_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_70b534f8b4a62106254b9a18dcb" PRIMARY KEY ("subscription_id", "topic", "partition", "from_offset"))`,
    );
    await queryRunner.query(`CREATE INDEX "skipped_ranges_recorded_idx" ON "skipped_ranges" ("last_recorded_at") `);
    await queryRunner.query(
      `ALTER TABLE "skipped_ranges" ADD CONSTRAINT "FK_54542111c47d41ad3e6197ea73f" FOREIGN KEY ("subscription_id") REFERENCES "subscriptions"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "skipped_ranges" DROP CONSTRAINT "FK_54542111c47d41ad3e6197ea73f"`);
    await queryRunner.query(`DROP INDEX "public"."skipped_ranges_recorded_idx"`);
    await queryRunner.query(`DROP TABLE "skipped_ranges"`);
  }
}
