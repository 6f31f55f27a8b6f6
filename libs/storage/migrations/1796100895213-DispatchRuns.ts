import { MigrationInterface, QueryRunner } from 'typeorm';

export class DispatchRuns1796100895213 implements MigrationInterface {
  name = 'DispatchRuns1796100895213';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "dispatch_runs" ("instance_id" text NOT NULL, "epoch" bigint NOT NULL DEFAULT '0', "owner" text, "claimed_at" TIMESTAMP WITH TIME ZONE, "renewed_at" TIMESTAMP WITH TIME ZONE, "rejected_writes" bigint NOT NULL DEFAULT '0', CONSTRAINT "PK_f3aa64d8228a89d3072fa61e7f8" PRIMARY KEY ("instance_id"))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "dispatch_runs"`);
  }
}
