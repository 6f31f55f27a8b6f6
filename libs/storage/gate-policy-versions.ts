import type { DataSource, EntityManager } from 'typeorm';

/**
 * The gate policies whose changes every instance picks up by polling their version: each is a table, and a
 * statement trigger on it (migration GateAclQuota) bumps its row of `gate_policy_versions` in the same
 * transaction as every change, whoever makes it (the admin API, or SQL by hand). A reader that sees a version
 * also sees the rows it stands for; no change goes unseen.
 */
export type GatePolicy = 'acl_rules' | 'tenant_quotas';

/** A policy's version: 0 before its first change. One primary-key row read, what each instance polls. */
export async function policyVersion(db: DataSource | EntityManager, policy: GatePolicy): Promise<number> {
  const rows: { version: string }[] = await db.query(`SELECT version FROM gate_policy_versions WHERE policy = $1`, [
    policy,
  ]);
  return rows.length === 0 ? 0 : Number(rows[0].version);
}
