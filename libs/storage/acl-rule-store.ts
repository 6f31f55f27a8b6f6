import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { policyVersion } from './gate-policy-versions';

/** A rule as stored: the fields as written (the gate validates them when it loads them; see libs/security/acl-rules.ts). */
export interface AclRuleRow {
  id: string;
  tenant: string;
  subject: string;
  action: string;
  topic: string;
  effect: string;
  createdAt: Date;
}

/** Every rule, and the version they are at. */
export interface AclRuleSnapshot {
  version: number;
  rules: AclRuleRow[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The columns of a rule, named as AclRuleRow names them. */
const COLUMNS = 'id, tenant, subject, action, topic, effect, created_at AS "createdAt"';

/**
 * The `acl_rules` table, and its policy version, which every change bumps in its own transaction (a trigger, see
 * gate-policy-versions.ts): an instance polls the version (`version()`) and reloads every rule (`snapshot()`)
 * when it moved. Every read and
 * write of the admin API is scoped to one tenant: another tenant's rule reads as no rule.
 */
export class AclRuleStore {
  constructor(private readonly db: DataSource) {}

  version(): Promise<number> {
    return policyVersion(this.db, 'acl_rules');
  }

  /**
   * Every rule of every tenant, with a version no newer than they are: the version is read first, so a change
   * committed between the two reads is seen now and reloaded again at the next poll, never missed.
   */
  async snapshot(): Promise<AclRuleSnapshot> {
    const version = await this.version();
    const rows: AclRuleRow[] = await this.db.query(`SELECT ${COLUMNS} FROM acl_rules ORDER BY created_at, id`);
    return { version, rules: rows };
  }

  async list(tenant: string): Promise<AclRuleRow[]> {
    const rows: AclRuleRow[] = await this.db.query(
      `SELECT ${COLUMNS} FROM acl_rules WHERE tenant = $1 ORDER BY created_at, id`,
      [tenant],
    );
    return rows;
  }

  /** Adds a rule (validated by the caller); the version moves with it. */
  async add(
    tenant: string,
    rule: { subject: string; action: string; topic: string; effect: string },
  ): Promise<AclRuleRow> {
    const [row]: AclRuleRow[] = await this.db.query(
      `INSERT INTO acl_rules (id, tenant, subject, action, topic, effect) VALUES ($1, $2, $3, $4, $5, $6)
       RETURNING ${COLUMNS}`,
      [randomUUID(), tenant, rule.subject, rule.action, rule.topic, rule.effect],
    );
    return row;
  }

  /**
   * Deletes the tenant's rule `id`. False when the tenant has no rule by that id (none at all, or another
   * tenant's): nothing was deleted.
   */
  async delete(tenant: string, id: string): Promise<boolean> {
    if (!UUID.test(id)) return false;
    const [deleted]: [{ id: string }[], number] = await this.db.query(
      `DELETE FROM acl_rules WHERE id = $1 AND tenant = $2 RETURNING id`,
      [id, tenant],
    );
    return deleted.length > 0;
  }
}
