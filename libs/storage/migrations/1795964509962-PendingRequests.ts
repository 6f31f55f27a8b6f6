import { MigrationInterface, QueryRunner } from 'typeorm';

export class PendingRequests1795964509962 implements MigrationInterface {
  name = 'PendingRequests1795964509962';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "pending_requests" ("correlation_id" text NOT NULL, "instance_id" text NOT NULL, "deadline" TIMESTAMP WITH TIME ZONE NOT NULL, "reply_attributes" jsonb, "reply_data" bytea, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_da5c1f59f59c0f781f95af290bb" PRIMARY KEY ("correlation_id"))`,
    );
    await queryRunner.query(`CREATE INDEX "pending_requests_deadline_idx" ON "pending_requests" ("deadline") `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."pending_requests_deadline_idx"`);
    await queryRunner.query(`DROP TABLE "pending_requests"`);
  }
}
