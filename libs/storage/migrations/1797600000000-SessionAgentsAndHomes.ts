import { MigrationInterface, QueryRunner } from 'typeorm';

export class SessionAgentsAndHomes1797600000000 implements MigrationInterface {
  name = 'SessionAgentsAndHomes1797600000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "session_agents" ("replica_id" text NOT NULL, "tenant" text NOT NULL, "agent" text NOT NULL, "holder" text NOT NULL, "instance_id" text NOT NULL, "address" text NOT NULL, "sessions" integer NOT NULL, "stats" jsonb NOT NULL DEFAULT '{}', "since" TIMESTAMP WITH TIME ZONE NOT NULL, "renewed_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_23f428690c6c1748e55b771b15b" PRIMARY KEY ("replica_id"))`,
    );
    await queryRunner.query(`CREATE INDEX "session_agents_renewed_idx" ON "session_agents" ("renewed_at") `);
    await queryRunner.query(`CREATE INDEX "session_agents_name_idx" ON "session_agents" ("tenant", "agent") `);
    await queryRunner.query(
      `CREATE TABLE "session_homes" ("tenant" text NOT NULL, "name" text NOT NULL, "holder" text NOT NULL, "instance_id" text NOT NULL, "address" text NOT NULL, "epoch" integer NOT NULL, "renewed_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_fdf999902c2a8c77872a0ca5a18" PRIMARY KEY ("tenant", "name"))`,
    );
    await queryRunner.query(`CREATE INDEX "session_homes_renewed_idx" ON "session_homes" ("renewed_at") `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."session_homes_renewed_idx"`);
    await queryRunner.query(`DROP TABLE "session_homes"`);
    await queryRunner.query(`DROP INDEX "public"."session_agents_name_idx"`);
    await queryRunner.query(`DROP INDEX "public"."session_agents_renewed_idx"`);
    await queryRunner.query(`DROP TABLE "session_agents"`);
  }
}
