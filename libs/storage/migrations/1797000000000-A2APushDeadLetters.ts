import { MigrationInterface, QueryRunner } from 'typeorm';

export class A2APushDeadLetters1797000000000 implements MigrationInterface {
  name = 'A2APushDeadLetters1797000000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "a2a_push_dead_letters" ("id" uuid NOT NULL, "tenant" text NOT NULL, "task_id" text NOT NULL, "agent" text NOT NULL, "config_id" text NOT NULL, "url" text NOT NULL, "task_version" integer NOT NULL, "task_state" text NOT NULL, "attempts" integer NOT NULL, "last_error" text NOT NULL, "last_http_status" integer, "dead_lettered_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "resolution" text, "resolved_at" TIMESTAMP WITH TIME ZONE, "resolved_version" integer, CONSTRAINT "a2a_push_dead_letters_version_key" UNIQUE ("task_id", "config_id", "task_version"), CONSTRAINT "PK_71fb75d6604e8aa08289550d9ef" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "a2a_push_dead_letters_tenant_idx" ON "a2a_push_dead_letters" ("tenant", "dead_lettered_at") `,
    );
    await queryRunner.query(
      `ALTER TABLE "a2a_push_dead_letters" ADD CONSTRAINT "FK_8e5be69623cf074d2d9400cf35c" FOREIGN KEY ("task_id") REFERENCES "a2a_tasks"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_push_dead_letters" DROP CONSTRAINT "FK_8e5be69623cf074d2d9400cf35c"`);
    await queryRunner.query(`DROP INDEX "public"."a2a_push_dead_letters_tenant_idx"`);
    await queryRunner.query(`DROP TABLE "a2a_push_dead_letters"`);
  }
}
