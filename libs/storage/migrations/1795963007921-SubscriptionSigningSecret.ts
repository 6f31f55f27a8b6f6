import { MigrationInterface, QueryRunner } from 'typeorm';

export class SubscriptionSigningSecret1795963007921 implements MigrationInterface {
  name = 'SubscriptionSigningSecret1795963007921';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "subscriptions" ADD "signing_secret" text`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "subscriptions" DROP COLUMN "signing_secret"`);
  }
}
