import { MigrationInterface, QueryRunner } from 'typeorm';

export class ApiKeys1796400000001 implements MigrationInterface {
  name = 'ApiKeys1796400000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "api_keys" ("id" text NOT NULL, "tenant" text NOT NULL, "principal" text NOT NULL, "name" text NOT NULL, "scopes" text array NOT NULL, "secret_hash" bytea NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "revoked_at" TIMESTAMP WITH TIME ZONE, "last_used_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "PK_5c8a79801b44bd27b79228e1dad" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(`CREATE INDEX "api_keys_tenant_idx" ON "api_keys" ("tenant", "created_at") `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."api_keys_tenant_idx"`);
    await queryRunner.query(`DROP TABLE "api_keys"`);
  }
}
