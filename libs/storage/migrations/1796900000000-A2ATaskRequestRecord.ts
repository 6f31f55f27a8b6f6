import { MigrationInterface, QueryRunner } from 'typeorm';

export class A2ATaskRequestRecord1796900000000 implements MigrationInterface {
  name = 'A2ATaskRequestRecord1796900000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    // Where the task's first request is in Kafka (topic, partition, offset). Tasks taken before this column existed
    // have it in their workflow's input instead.
    await queryRunner.query(`ALTER TABLE "a2a_tasks" ADD "request_record" jsonb`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_tasks" DROP COLUMN "request_record"`);
  }
}
