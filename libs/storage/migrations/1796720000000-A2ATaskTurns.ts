import { MigrationInterface, QueryRunner } from 'typeorm';

export class A2ATaskTurns1796720000000 implements MigrationInterface {
  name = 'A2ATaskTurns1796720000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_tasks" ADD "delivered_turn" integer NOT NULL DEFAULT '0'`);
    // A task the agent already has (its id recorded) had its first and only turn sent.
    await queryRunner.query(`UPDATE "a2a_tasks" SET "delivered_turn" = 1 WHERE "agent_task_id" IS NOT NULL`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_tasks" DROP COLUMN "delivered_turn"`);
  }
}
