import { MigrationInterface, QueryRunner } from 'typeorm';

export class A2APushConfigs1796710000000 implements MigrationInterface {
  name = 'A2APushConfigs1796710000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "a2a_push_configs" ("task_id" text NOT NULL, "id" text NOT NULL, "tenant" text NOT NULL, "url" text NOT NULL, "token" text, "authentication" jsonb, "wire_version" text NOT NULL, "pushed_version" integer NOT NULL DEFAULT '0', "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_3c59faa5a08346570bfb1fefac4" PRIMARY KEY ("task_id", "id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "a2a_push_configs_tenant_task_idx" ON "a2a_push_configs" ("tenant", "task_id") `,
    );
    await queryRunner.query(
      `ALTER TABLE "a2a_push_configs" ADD CONSTRAINT "FK_3c23b703c28a62332faa2e5009e" FOREIGN KEY ("task_id") REFERENCES "a2a_tasks"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_push_configs" DROP CONSTRAINT "FK_3c23b703c28a62332faa2e5009e"`);
    await queryRunner.query(`DROP INDEX "public"."a2a_push_configs_tenant_task_idx"`);
    await queryRunner.query(`DROP TABLE "a2a_push_configs"`);
  }
}
