import { MigrationInterface, QueryRunner } from 'typeorm';

export class PresenceHolders1797700000000 implements MigrationInterface {
  name = 'PresenceHolders1797700000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "presence_holders" ("holder" text NOT NULL, "epoch" bigint NOT NULL, "claimed_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_b949cf7c8fd9495171f5ac98934" PRIMARY KEY ("holder"))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "presence_holders"`);
  }
}
