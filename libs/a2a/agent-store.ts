import type { DataSource } from 'typeorm';
import type { RegisteredCard } from './agent-card';

export interface StoredAgent {
  tenant: string;
  name: string;
  card: RegisteredCard;
  createdAt: Date;
  updatedAt: Date;
}

interface RawAgent {
  tenant: string;
  name: string;
  card: RegisteredCard;
  created_at: Date;
  updated_at: Date;
}

const agentOf = (r: RawAgent): StoredAgent => ({ tenant: r.tenant, name: r.name, card: r.card, createdAt: r.created_at, updatedAt: r.updated_at });

/** Which agents a listing returns: those with a skill of this id, or a skill with this tag. */
export interface AgentFilter {
  skill?: string;
  tag?: string;
}

/** The `a2a_agents` table: each tenant's registered agents and their cards. Every read and write names the tenant. */
export class A2AAgentStore {
  constructor(private readonly db: DataSource) {}

  /** Registers the agent, or replaces its card; `created` says which. */
  async put(tenant: string, name: string, card: RegisteredCard): Promise<{ agent: StoredAgent; created: boolean }> {
    const [row]: (RawAgent & { inserted: boolean })[] = await this.db.query(
      `INSERT INTO a2a_agents (tenant, name, card) VALUES ($1, $2, $3)
       ON CONFLICT (tenant, name) DO UPDATE SET card = EXCLUDED.card, updated_at = now()
       RETURNING tenant, name, card, created_at, updated_at, (xmax = 0) AS inserted`,
      [tenant, name, JSON.stringify(card)],
    );
    return { agent: agentOf(row), created: row.inserted };
  }

  async get(tenant: string, name: string): Promise<StoredAgent | undefined> {
    const rows: RawAgent[] = await this.db.query(`SELECT tenant, name, card, created_at, updated_at FROM a2a_agents WHERE tenant = $1 AND name = $2`, [tenant, name]);
    return rows.length === 0 ? undefined : agentOf(rows[0]);
  }

  /** Removes the agent; false when the tenant has none by that name. Its tasks stay (readable by id). */
  async delete(tenant: string, name: string): Promise<boolean> {
    // TypeORM answers a DELETE on Postgres with [rows, affected].
    const [, affected]: [unknown[], number] = await this.db.query(`DELETE FROM a2a_agents WHERE tenant = $1 AND name = $2`, [tenant, name]);
    return affected > 0;
  }

  /** The tenant's agents by name, filtered by a skill id or a skill tag. */
  async list(tenant: string, filter: AgentFilter = {}): Promise<StoredAgent[]> {
    const where = ['tenant = $1'];
    const params: unknown[] = [tenant];
    if (filter.skill !== undefined) {
      params.push(JSON.stringify([{ id: filter.skill }]));
      where.push(`card->'skills' @> $${params.length}::jsonb`);
    }
    if (filter.tag !== undefined) {
      params.push(JSON.stringify([{ tags: [filter.tag] }]));
      where.push(`card->'skills' @> $${params.length}::jsonb`);
    }
    const rows: RawAgent[] = await this.db.query(
      `SELECT tenant, name, card, created_at, updated_at FROM a2a_agents WHERE ${where.join(' AND ')} ORDER BY name`,
      params,
    );
    return rows.map(agentOf);
  }
}
