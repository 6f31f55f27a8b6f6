import type { DataSource } from 'typeorm';
import { createLogger } from '../logging';
import { SecretBox } from './secret-box';

/** The columns that hold secrets sealed by the SecretBox. */
const SEALED_COLUMNS = [
  { table: 'subscriptions', column: 'signing_secret' },
  { table: 'publisher_secrets', column: 'secret' },
] as const;

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
export async function sealStoredSecrets(db: DataSource, box: SecretBox, options: { batch?: number; maxRows?: number } = {}): Promise<SealReport> {
  const log = createLogger('SecretSealer');
  const batch = options.batch ?? 200;
  let budget = options.maxRows ?? 5000;
  const report: SealReport = { sealed: 0, resealed: 0, unreadable: 0, more: false };
  const activePrefix = `v1:${box.activeKey}:`;
  for (const { table, column } of SEALED_COLUMNS) {
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      if (budget <= 0) {
        report.more = true;
        break;
      }
      const rows: { id: string; value: string }[] = await db.query(
        `SELECT id::text AS id, ${column} AS value FROM ${table}
          WHERE ${column} IS NOT NULL AND left(${column}, $1) <> $2 AND id > $3::uuid ORDER BY id LIMIT $4`,
        [activePrefix.length, activePrefix, after, Math.min(batch, budget)],
      );
      if (rows.length === 0) break;
      budget -= rows.length;
      after = rows[rows.length - 1].id;
      for (const row of rows) {
        let value: string;
        try {
          value = SecretBox.isSealed(row.value) ? box.reseal(row.value) : box.seal(row.value);
        } catch (e) {
          report.unreadable++;
          log.error({ table, id: row.id, error: (e as Error).message }, 'stored secret cannot be opened; left as it is');
          continue;
        }
        const [, changed]: [unknown, number] = await db.query(`UPDATE ${table} SET ${column} = $1 WHERE id = $2 AND ${column} = $3`, [value, row.id, row.value]);
        if (changed !== 1) continue;
        if (SecretBox.isSealed(row.value)) report.resealed++;
        else report.sealed++;
      }
    }
  }
  budget = await sealPushConfigs(db, box, { batch, budget, activePrefix, report, log });
  if (report.sealed + report.resealed + report.unreadable > 0 || report.more) {
    log.info({ ...report, activeKey: box.activeKey }, report.more ? 'stored secrets partly brought to the active key; the next boot goes on' : 'stored secrets brought to the active key');
  }
  return report;
}

/**
 * The A2A push configs' secrets (`a2a_push_configs`: the token, and the authentication's credentials inside its
 * jsonb), keyed by task and config id: the same pass as the other columns, both values of a row written together.
 * Returns the budget left.
 */
async function sealPushConfigs(
  db: DataSource,
  box: SecretBox,
  pass: { batch: number; budget: number; activePrefix: string; report: SealReport; log: ReturnType<typeof createLogger> },
): Promise<number> {
  const { batch, activePrefix, report, log } = pass;
  let budget = pass.budget;
  const stale = (value: string | null | undefined) => value !== null && value !== undefined && !value.startsWith(activePrefix);
  let after = { taskId: '', id: '' };
  for (;;) {
    if (budget <= 0) {
      report.more = true;
      return budget;
    }
    const rows: { task_id: string; id: string; token: string | null; credentials: string | null }[] = await db.query(
      `SELECT task_id, id, token, authentication->>'credentials' AS credentials FROM a2a_push_configs
        WHERE ((token IS NOT NULL AND left(token, $1) <> $2) OR (authentication->>'credentials' IS NOT NULL AND left(authentication->>'credentials', $1) <> $2))
          AND (task_id, id) > ($3, $4) ORDER BY task_id, id LIMIT $5`,
      [activePrefix.length, activePrefix, after.taskId, after.id, Math.min(batch, budget)],
    );
    if (rows.length === 0) return budget;
    budget -= rows.length;
    const last = rows[rows.length - 1];
    after = { taskId: last.task_id, id: last.id };
    for (const row of rows) {
      const bring = (value: string | null) => (stale(value) ? (SecretBox.isSealed(value!) ? box.reseal(value!) : box.seal(value!)) : value);
      let token: string | null;
      let credentials: string | null;
      try {
        token = bring(row.token);
        credentials = bring(row.credentials);
      } catch (e) {
        report.unreadable++;
        log.error({ table: 'a2a_push_configs', id: `${row.task_id}/${row.id}`, error: (e as Error).message }, 'stored secret cannot be opened; left as it is');
        continue;
      }
      const [, changed]: [unknown, number] = await db.query(
        `UPDATE a2a_push_configs SET token = $3,
            authentication = CASE WHEN authentication IS NULL THEN NULL ELSE jsonb_set(authentication, '{credentials}', to_jsonb($4::text)) END
          WHERE task_id = $1 AND id = $2 AND token IS NOT DISTINCT FROM $5 AND authentication->>'credentials' IS NOT DISTINCT FROM $6`,
        [row.task_id, row.id, token, credentials, row.token, row.credentials],
      );
      if (changed !== 1) continue;
      if ([row.token, row.credentials].some((v) => v !== null && !SecretBox.isSealed(v))) report.sealed++;
      else report.resealed++;
    }
  }
}
