import { MigrationInterface, QueryRunner } from 'typeorm';

/** The retention's index covers the tasks waiting for their client as well as those that ended. */
export class A2ATaskIdleRetention1797300000000 implements MigrationInterface {
  name = 'A2ATaskIdleRetention1797300000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX "a2a_tasks_settled_idx" ON "a2a_tasks" ("updated_at") WHERE "state" IN ('completed', 'failed', 'canceled', 'rejected', 'input-required', 'auth-required')`,
    );
    await queryRunner.query(`DROP INDEX "public"."a2a_tasks_ended_idx"`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX "a2a_tasks_ended_idx" ON "a2a_tasks" ("updated_at") WHERE "state" IN ('completed', 'failed', 'canceled', 'rejected')`,
    );
    await queryRunner.query(`DROP INDEX "public"."a2a_tasks_settled_idx"`);
  }
}
