import { MigrationInterface, QueryRunner } from 'typeorm';

/** How often the mesh sent a task's first turn again after its agent lost the task (at most once). */
export class A2ATaskAgentResends1797400000000 implements MigrationInterface {
  name = 'A2ATaskAgentResends1797400000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_tasks" ADD "agent_resends" integer NOT NULL DEFAULT 0`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_tasks" DROP COLUMN "agent_resends"`);
  }
}
