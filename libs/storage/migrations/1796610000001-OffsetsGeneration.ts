import { MigrationInterface, QueryRunner } from 'typeorm';

export class OffsetsGeneration1796610000001 implements MigrationInterface {
  name = 'OffsetsGeneration1796610000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "subscriptions" ADD "offsets_generation" bigint NOT NULL DEFAULT '0'`);
    await queryRunner.query(`ALTER TABLE "subscription_offsets" ADD "generation" bigint NOT NULL DEFAULT '0'`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "subscription_offsets" DROP COLUMN "generation"`);
    await queryRunner.query(`ALTER TABLE "subscriptions" DROP COLUMN "offsets_generation"`);
  }
}
