import { MigrationInterface, QueryRunner } from 'typeorm';

/** The operator's grants of shared topics to tenants (`/admin/topics/{topic}/grants`). */
export class TopicGrants1797500000001 implements MigrationInterface {
  name = 'TopicGrants1797500000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "topic_grants" ("topic" text NOT NULL, "tenant" text NOT NULL, "action" text NOT NULL, "granted_by" text NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_fc02a357bf04d241928a6de1e5a" PRIMARY KEY ("topic", "tenant", "action"))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "topic_grants"`);
  }
}
