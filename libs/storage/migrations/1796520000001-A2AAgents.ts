import { MigrationInterface, QueryRunner } from 'typeorm';

export class A2AAgents1796520000001 implements MigrationInterface {
  name = 'A2AAgents1796520000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "a2a_agents" ("tenant" text NOT NULL, "name" text NOT NULL, "card" jsonb NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_482ee79988272388f4d50b35018" PRIMARY KEY ("tenant", "name"))`,
    );
    await queryRunner.query(`ALTER TABLE "a2a_tasks" ADD "agent" text NOT NULL DEFAULT ''`);
    await queryRunner.query(`ALTER TABLE "a2a_tasks" ADD "agent_task_id" text`);
    await queryRunner.query(`ALTER TABLE "a2a_tasks" ADD "status_message" jsonb`);
    await queryRunner.query(
      `CREATE INDEX "a2a_tasks_tenant_agent_created_idx" ON "a2a_tasks" ("tenant", "agent", "created_at", "id") `,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."a2a_tasks_tenant_agent_created_idx"`);
    await queryRunner.query(`ALTER TABLE "a2a_tasks" DROP COLUMN "status_message"`);
    await queryRunner.query(`ALTER TABLE "a2a_tasks" DROP COLUMN "agent_task_id"`);
    await queryRunner.query(`ALTER TABLE "a2a_tasks" DROP COLUMN "agent"`);
    await queryRunner.query(`DROP TABLE "a2a_agents"`);
  }
}
