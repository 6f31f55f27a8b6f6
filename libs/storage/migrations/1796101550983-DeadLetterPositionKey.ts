import { MigrationInterface, QueryRunner } from 'typeorm';

export class DeadLetterPositionKey1796101550983 implements MigrationInterface {
  name = 'DeadLetterPositionKey1796101550983';

  public async up(queryRunner: QueryRunner): Promise<void> {
    // Hand-written, before the generated statements: the key and the foreign key need the rows to obey them.
    // Dead letters of deleted subscriptions could not be read any more (GET .../dead-letters answers 404 for
    // an unknown subscription); from now on they are deleted with their subscription, so those go now.
    await queryRunner.query(
      `DELETE FROM "dead_letters" d WHERE NOT EXISTS (SELECT 1 FROM "subscriptions" s WHERE s."id" = d."subscription_id")`,
    );
    // A crash between a dead-letter write and the next offset commit wrote a position twice: keep the earliest.
    await queryRunner.query(
      `DELETE FROM "dead_letters" d USING "dead_letters" e WHERE e."subscription_id" = d."subscription_id" AND e."topic" = d."topic" AND e."partition" = d."partition" AND e."kafka_offset" = d."kafka_offset" AND (e."created_at", e."id") < (d."created_at", d."id")`,
    );
    await queryRunner.query(`CREATE INDEX "dead_letters_created_idx" ON "dead_letters" ("created_at") `);
    await queryRunner.query(
      `CREATE UNIQUE INDEX "dead_letters_position_key" ON "dead_letters" ("subscription_id", "topic", "partition", "kafka_offset") `,
    );
    await queryRunner.query(
      `ALTER TABLE "dead_letters" ADD CONSTRAINT "FK_77abb9bd03d8f46ea6c7a53a55a" FOREIGN KEY ("subscription_id") REFERENCES "subscriptions"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "dead_letters" DROP CONSTRAINT "FK_77abb9bd03d8f46ea6c7a53a55a"`);
    await queryRunner.query(`DROP INDEX "public"."dead_letters_position_key"`);
    await queryRunner.query(`DROP INDEX "public"."dead_letters_created_idx"`);
  }
}
