import { MigrationInterface, QueryRunner } from 'typeorm';

export class A2ATaskEventsPublished1796800000000 implements MigrationInterface {
  name = 'A2ATaskEventsPublished1796800000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "a2a_tasks" ADD "published_seq" integer NOT NULL DEFAULT '0'`);
    // The tasks of before the events topics: their past events are not sent to the new topics.
    await queryRunner.query(`UPDATE "a2a_tasks" SET "published_seq" = "event_seq"`);
    await queryRunner.query(
      `CREATE INDEX "a2a_tasks_unpublished_idx" ON "a2a_tasks" ("updated_at") WHERE "event_seq" > "published_seq"`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."a2a_tasks_unpublished_idx"`);
    await queryRunner.query(`ALTER TABLE "a2a_tasks" DROP COLUMN "published_seq"`);
  }
}
