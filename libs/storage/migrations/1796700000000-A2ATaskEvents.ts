import { MigrationInterface, QueryRunner } from 'typeorm';

export class A2ATaskEvents1796700000000 implements MigrationInterface {
  name = 'A2ATaskEvents1796700000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "a2a_task_events" ("task_id" text NOT NULL, "seq" integer NOT NULL, "kind" text NOT NULL, "payload" jsonb NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_6e501052e21275db25fe5ac71ac" PRIMARY KEY ("task_id", "seq"))`,
    );
    await queryRunner.query(`ALTER TABLE "a2a_tasks" ADD "event_seq" integer NOT NULL DEFAULT '0'`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_tasks" DROP COLUMN "event_seq"`);
    await queryRunner.query(`DROP TABLE "a2a_task_events"`);
  }
}
