import { MigrationInterface, QueryRunner } from 'typeorm';

export class DeadLetterReplay1796600000001 implements MigrationInterface {
  name = 'DeadLetterReplay1796600000001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "dead_letters" ADD "replayed_at" TIMESTAMP WITH TIME ZONE`);
    await queryRunner.query(`ALTER TABLE "dead_letters" ADD "replay_id" text`);
    await queryRunner.query(`ALTER TABLE "dead_letters" ADD "replay_claimed_until" TIMESTAMP WITH TIME ZONE`);
    await queryRunner.query(
      `CREATE INDEX "dead_letters_subscription_id_idx" ON "dead_letters" ("subscription_id", "id") `,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."dead_letters_subscription_id_idx"`);
    await queryRunner.query(`ALTER TABLE "dead_letters" DROP COLUMN "replay_claimed_until"`);
    await queryRunner.query(`ALTER TABLE "dead_letters" DROP COLUMN "replay_id"`);
    await queryRunner.query(`ALTER TABLE "dead_letters" DROP COLUMN "replayed_at"`);
  }
}
