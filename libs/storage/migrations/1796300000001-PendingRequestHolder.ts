import { MigrationInterface, QueryRunner } from 'typeorm';

export class PendingRequestHolder1796300000001 implements MigrationInterface {
  name = 'PendingRequestHolder1796300000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "pending_requests" ADD "holder_key" integer`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "pending_requests" DROP COLUMN "holder_key"`);
  }
}
