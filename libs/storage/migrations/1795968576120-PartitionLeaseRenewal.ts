import { MigrationInterface, QueryRunner } from 'typeorm';

export class PartitionLeaseRenewal1795968576120 implements MigrationInterface {
  name = 'PartitionLeaseRenewal1795968576120';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "partition_leases" ADD "renewed_at" TIMESTAMP WITH TIME ZONE`);
    await queryRunner.query(`ALTER TABLE "partition_leases" ADD "rejected_writes" bigint NOT NULL DEFAULT '0'`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "partition_leases" DROP COLUMN "rejected_writes"`);
    await queryRunner.query(`ALTER TABLE "partition_leases" DROP COLUMN "renewed_at"`);
  }
}
