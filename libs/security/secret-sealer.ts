import type { DataSource } from 'typeorm';
import { createLogger } from '@libs/logging';
import { SEALED_SECRET_TABLES } from '@libs/storage';
import { SecretBox } from './secret-box';

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
  for (const secrets of SEALED_SECRET_TABLES) {
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
