import { MigrationInterface, QueryRunner } from 'typeorm';

export class StreamPresence1796500000001 implements MigrationInterface {
  name = 'StreamPresence1796500000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "stream_presence" ("subscription_id" uuid NOT NULL, "holder" text NOT NULL, "instance_id" text NOT NULL, "address" text NOT NULL, "members" integer NOT NULL, "window" integer NOT NULL, "renewed_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_1ab096be33fb7793456b86c9038" PRIMARY KEY ("subscription_id", "holder"))`,
    );
    await queryRunner.query(`CREATE INDEX "stream_presence_renewed_idx" ON "stream_presence" ("renewed_at") `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."stream_presence_renewed_idx"`);
    await queryRunner.query(`DROP TABLE "stream_presence"`);
  }
}
