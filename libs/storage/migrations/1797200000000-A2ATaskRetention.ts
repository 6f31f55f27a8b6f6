import { MigrationInterface, QueryRunner } from 'typeorm';

export class A2ATaskRetention1797200000000 implements MigrationInterface {
  name = 'A2ATaskRetention1797200000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX "a2a_tasks_ended_idx" ON "a2a_tasks" ("updated_at") WHERE "state" IN ('completed', 'failed', 'canceled', 'rejected')`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."a2a_tasks_ended_idx"`);
  }
}
