import type { DataSource } from 'typeorm';

/** A row holding secrets of which one at least is not sealed with the active key. */
export interface StaleSecretRow {
  /** The row's key, in the pass's order: where the next batch goes on from. */
  key: string[];
  /** Its sealed values (null: none), as read. */
  values: (string | null)[];
}

/**
 * Where secrets sealed by the SecretBox are stored (libs/security/secret-sealer.ts brings them to the active key):
 * how to read the rows that need the active key (after a key, at most `limit`, in key order), and how to write a
 * row's values back only if it still holds what was read.
 */
export interface SealedSecretTable {
  table: string;
  read(db: DataSource, activePrefix: string, after: string[] | undefined, limit: number): Promise<StaleSecretRow[]>;
  write(db: DataSource, row: StaleSecretRow, values: (string | null)[]): Promise<boolean>;
}

/** A column of secrets, keyed by the table's uuid `id`. */
function sealedColumn(table: string, column: string): SealedSecretTable {
  return {
    table,
    async read(db, activePrefix, after, limit) {
      const rows: { id: string; value: string }[] = await db.query(
        `SELECT id::text AS id, ${column} AS value FROM ${table}
          WHERE ${column} IS NOT NULL AND left(${column}, $1) <> $2 AND id > $3::uuid ORDER BY id LIMIT $4`,
        [activePrefix.length, activePrefix, after?.[0] ?? '00000000-0000-0000-0000-000000000000', limit],
      );
      return rows.map((r) => ({ key: [r.id], values: [r.value] }));
    },
    async write(db, row, [value]) {
      const [, changed]: [unknown, number] = await db.query(
        `UPDATE ${table} SET ${column} = $1 WHERE id = $2 AND ${column} = $3`,
        [value, row.key[0], row.values[0]],
      );
      return changed === 1;
    },
  };
}

/** The A2A push configs' secrets: the token, and the authentication's credentials inside its jsonb; keyed by task and config id. */
const PUSH_CONFIG_SECRETS: SealedSecretTable = {
  table: 'a2a_push_configs',
  async read(db, activePrefix, after, limit) {
    const rows: { task_id: string; id: string; token: string | null; credentials: string | null }[] = await db.query(
      `SELECT task_id, id, token, authentication->>'credentials' AS credentials FROM a2a_push_configs
        WHERE ((token IS NOT NULL AND left(token, $1) <> $2) OR (authentication->>'credentials' IS NOT NULL AND left(authentication->>'credentials', $1) <> $2))
          AND (task_id, id) > ($3, $4) ORDER BY task_id, id LIMIT $5`,
      [activePrefix.length, activePrefix, after?.[0] ?? '', after?.[1] ?? '', limit],
    );
    return rows.map((r) => ({ key: [r.task_id, r.id], values: [r.token, r.credentials] }));
  },
  async write(db, row, [token, credentials]) {
    const [, changed]: [unknown, number] = await db.query(
      `UPDATE a2a_push_configs SET token = $3,
          authentication = CASE WHEN authentication IS NULL THEN NULL ELSE jsonb_set(authentication, '{credentials}', to_jsonb($4::text)) END
        WHERE task_id = $1 AND id = $2 AND token IS NOT DISTINCT FROM $5 AND authentication->>'credentials' IS NOT DISTINCT FROM $6`,
      [row.key[0], row.key[1], token, credentials, row.values[0], row.values[1]],
    );
    return changed === 1;
  },
};

/** Everywhere secrets sealed by the SecretBox (libs/security/secret-box.ts) are stored. */
export const SEALED_SECRET_TABLES: readonly SealedSecretTable[] = [
  sealedColumn('subscriptions', 'signing_secret'),
  sealedColumn('publisher_secrets', 'secret'),
  PUSH_CONFIG_SECRETS,
];
