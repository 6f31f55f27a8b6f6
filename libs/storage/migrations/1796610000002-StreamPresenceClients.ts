import { MigrationInterface, QueryRunner } from 'typeorm';

export class StreamPresenceClients1796610000002 implements MigrationInterface {
  name = 'StreamPresenceClients1796610000002';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "stream_presence" ADD "clients" jsonb NOT NULL DEFAULT '[]'`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "stream_presence" DROP COLUMN "clients"`);
  }
}
