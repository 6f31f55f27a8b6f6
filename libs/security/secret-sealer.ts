import type { DataSource } from 'typeorm';
import { createLogger } from '@libs/logging';
import { SecretBox } from './secret-box';

/** A row holding secrets of which one at least is not sealed with the active key. */
interface StaleRow {
  /** The row's key, in the pass's order: where the next batch goes on from. */
  key: string[];
  /** Its sealed values (null: none), as read. */
  values: (string | null)[];
}

/**
 * Where secrets sealed by the SecretBox are stored: how to read the rows that need the active key (after a key, at
 * most `limit`, in key order), and how to write a row's values back only if it still holds what was read.
 */
interface SealedSecrets {
  table: string;
  read(db: DataSource, activePrefix: string, after: string[] | undefined, limit: number): Promise<StaleRow[]>;
  write(db: DataSource, row: StaleRow, values: (string | null)[]): Promise<boolean>;
}

/** A column of secrets, keyed by the table's uuid `id`. */
function sealedColumn(table: string, column: string): SealedSecrets {
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
const PUSH_CONFIG_SECRETS: SealedSecrets = {
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

/** Everywhere secrets sealed by the SecretBox are stored. */
const SEALED: readonly SealedSecrets[] = [
  sealedColumn('subscriptions', 'signing_secret'),
  sealedColumn('publisher_secrets', 'secret'),
  PUSH_CONFIG_SECRETS,
];

export interface SealReport {
  /** Values stored in the clear (by an earlier version) now sealed. */
  sealed: number;
  /** Values sealed with an older key now sealed with the active one. */
  resealed: number;
  /** Values that do not open (their key is not configured): left as they are, logged. */
  unreadable: number;
  /** True when the bound stopped the pass before the end: the next boot goes on. */
  more: boolean;
}

/**
 * Brings the stored secrets to the active key, at boot, in small batches and with a bound on the rows per boot:
 * a secret an earlier version stored in the clear is sealed, one sealed with an older key is sealed again with
 * the active one (key rotation; the old key must stay configured until no value needs it). Each row is written
 * only if it still holds what was read, so instances booting together never seal a value twice. A value that
 * does not open is left alone and logged: its key is missing from EVENTMESH_SECURITY_SECRETS_KEYS.
 */
export async function sealStoredSecrets(
  db: DataSource,
  box: SecretBox,
  options: { batch?: number; maxRows?: number } = {},
): Promise<SealReport> {
  const log = createLogger('SecretSealer');
  const batch = options.batch ?? 200;
  let budget = options.maxRows ?? 5000;
  const report: SealReport = { sealed: 0, resealed: 0, unreadable: 0, more: false };
  const activePrefix = `v1:${box.activeKey}:`;
  // A value already under the active key stays; one in the clear is sealed, one under an older key sealed again.
  const bring = (value: string | null) =>
    value === null || value.startsWith(activePrefix)
      ? value
      : SecretBox.isSealed(value)
        ? box.reseal(value)
        : box.seal(value);
  for (const secrets of SEALED) {
    let after: string[] | undefined;
    while (!report.more) {
      if (budget <= 0) {
        report.more = true;
        break;
      }
      const rows = await secrets.read(db, activePrefix, after, Math.min(batch, budget));
      if (rows.length === 0) break;
      budget -= rows.length;
      after = rows[rows.length - 1].key;
      for (const row of rows) {
        let values: (string | null)[];
        try {
          values = row.values.map(bring);
        } catch (e) {
          report.unreadable++;
          log.error(
            { table: secrets.table, id: row.key.join('/'), error: (e as Error).message },
            'stored secret cannot be opened; left as it is',
          );
          continue;
        }
        if (!(await secrets.write(db, row, values))) continue;
        if (row.values.some((v) => v !== null && !SecretBox.isSealed(v))) report.sealed++;
        else report.resealed++;
      }
    }
  }
  if (report.sealed + report.resealed + report.unreadable > 0 || report.more) {
    log.info(
      { ...report, activeKey: box.activeKey },
      report.more
        ? 'stored secrets partly brought to the active key; the next boot goes on'
        : 'stored secrets brought to the active key',
    );
  }
  return report;
}
