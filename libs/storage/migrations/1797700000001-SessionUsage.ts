import { MigrationInterface, QueryRunner } from 'typeorm';

export class SessionUsage1797700000001 implements MigrationInterface {
  name = 'SessionUsage1797700000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "session_usage" ("tenant" text NOT NULL, "holder" text NOT NULL, "instance_id" text NOT NULL, "sessions" integer NOT NULL, "agents" integer NOT NULL, "bytes" bigint NOT NULL, "renewed_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_2235e2520f06a1fe272994e8f0c" PRIMARY KEY ("tenant", "holder"))`,
    );
    await queryRunner.query(`CREATE INDEX "session_usage_renewed_idx" ON "session_usage" ("renewed_at") `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."session_usage_renewed_idx"`);
    await queryRunner.query(`DROP TABLE "session_usage"`);
  }
}
