import { MigrationInterface, QueryRunner } from 'typeorm';

export class PublisherSecrets1796410000001 implements MigrationInterface {
  name = 'PublisherSecrets1796410000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "publisher_secrets" ("id" uuid NOT NULL, "tenant" text NOT NULL, "principal" text NOT NULL, "secret" text NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_00c5803f071abc17ff724dad251" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "publisher_secrets_principal_idx" ON "publisher_secrets" ("tenant", "principal") `,
    );
    await queryRunner.query(
      `CREATE TABLE "signature_replays" ("tenant" text NOT NULL, "principal" text NOT NULL, "webhook_id" text NOT NULL, "seen_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "PK_077639af03483c33c896b7b6c5e" PRIMARY KEY ("tenant", "principal", "webhook_id"))`,
    );
    await queryRunner.query(`CREATE INDEX "signature_replays_expires_idx" ON "signature_replays" ("expires_at") `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."signature_replays_expires_idx"`);
    await queryRunner.query(`DROP TABLE "signature_replays"`);
    await queryRunner.query(`DROP INDEX "public"."publisher_secrets_principal_idx"`);
    await queryRunner.query(`DROP TABLE "publisher_secrets"`);
  }
}
