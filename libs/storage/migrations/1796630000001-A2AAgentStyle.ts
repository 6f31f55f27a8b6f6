import { MigrationInterface, QueryRunner } from 'typeorm';

export class A2AAgentStyle1796630000001 implements MigrationInterface {
  name = 'A2AAgentStyle1796630000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_agents" ADD "style" text NOT NULL DEFAULT 'url'`);
    await queryRunner.query(`ALTER TABLE "a2a_agents" ADD "heartbeat_at" TIMESTAMP WITH TIME ZONE`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_agents" DROP COLUMN "heartbeat_at"`);
    await queryRunner.query(`ALTER TABLE "a2a_agents" DROP COLUMN "style"`);
  }
}
