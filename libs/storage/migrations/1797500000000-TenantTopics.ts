import { MigrationInterface, QueryRunner } from 'typeorm';

/** Tenants' own topics (`POST /topics`): the short name a tenant's clients use, its partitions and retention. */
export class TenantTopics1797500000000 implements MigrationInterface {
  name = 'TenantTopics1797500000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "tenant_topics" ("tenant" text NOT NULL, "name" text NOT NULL, "partitions" integer NOT NULL, "retention_ms" bigint, "ready" boolean NOT NULL DEFAULT false, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_75e76ab3987d669027f726b6a26" PRIMARY KEY ("tenant", "name"))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "tenant_topics"`);
  }
}
