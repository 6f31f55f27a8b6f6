import { MigrationInterface, QueryRunner } from 'typeorm';

export class A2APushDeadLetterAge1797100000000 implements MigrationInterface {
  name = 'A2APushDeadLetterAge1797100000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX "a2a_push_dead_letters_age_idx" ON "a2a_push_dead_letters" ("dead_lettered_at") `,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."a2a_push_dead_letters_age_idx"`);
  }
}
