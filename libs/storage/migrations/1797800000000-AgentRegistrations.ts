import { MigrationInterface, QueryRunner } from 'typeorm';

export class AgentRegistrations1797800000000 implements MigrationInterface {
  name = 'AgentRegistrations1797800000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_agents" ADD "registration" integer NOT NULL DEFAULT 1`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_agents" DROP COLUMN "registration"`);
  }
}
