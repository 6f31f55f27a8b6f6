import type { DataSource } from 'typeorm';

/** How an agent takes its tasks: `url`, the mesh calls its A2A server; `subscriber`, its subscription on its request topic delivers them. */
export type AgentStyle = 'url' | 'subscriber';
export const AGENT_STYLES: readonly AgentStyle[] = ['url', 'subscriber'];

/**
 * A registered agent as stored. `Card` is its card's type, which the A2A feature declares and validates (libs/a2a);
 * the table keeps it as jsonb.
 */
export interface StoredAgentRow<Card> {
  tenant: string;
  name: string;
  card: Card;
  style: AgentStyle;
  /** A subscriber's last heartbeat (its registration counts as one); null for an agent at a URL. */
  heartbeatAt: Date | null;
  /** Its registration, counted from 1: each registration (PUT) takes the next. */
  registration: number;
  createdAt: Date;
  updatedAt: Date;
}

interface RawAgent<Card> {
  tenant: string;
  name: string;
  card: Card;
  style: AgentStyle;
  heartbeat_at: Date | null;
  registration: number;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'tenant, name, card, style, heartbeat_at, registration, created_at, updated_at';

const agentOf = <Card>(r: RawAgent<Card>): StoredAgentRow<Card> => ({
  tenant: r.tenant,
  name: r.name,
  card: r.card,
  style: r.style,
  heartbeatAt: r.heartbeat_at,
  registration: r.registration,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** Which agents a listing returns: those with a skill of this id, or a skill with this tag. */
export interface AgentFilter {
  skill?: string;
  tag?: string;
}

/** The tenant ($1) has fewer agents than $3, or has the agent $2 (a replacement). */
const FITS =
  '((SELECT count(*) FROM a2a_agents WHERE tenant = $1) < $3 OR EXISTS (SELECT 1 FROM a2a_agents WHERE tenant = $1 AND name = $2))';

/** The `a2a_agents` table: each tenant's registered agents and their cards. Every read and write names the tenant. */
export class A2AAgentRows<Card> {
  constructor(private readonly db: DataSource) {}

  /**
   * Registers the agent, or replaces its card and style; `created` says which. A subscriber's registration is a
   * heartbeat. Undefined when the tenant has `maxPerTenant` agents and this is not one of them (nothing written).
   */
  async put(
    tenant: string,
    name: string,
    card: Card,
    style: AgentStyle,
    maxPerTenant: number,
  ): Promise<{ agent: StoredAgentRow<Card>; created: boolean } | undefined> {
    const rows: (RawAgent<Card> & { inserted: boolean })[] = await this.db.query(
      `INSERT INTO a2a_agents (tenant, name, card, style, heartbeat_at)
       SELECT $1, $2, $3, $4, CASE WHEN $4 = 'subscriber' THEN now() END
       WHERE ${FITS.replace('$3', '$5')}
       ON CONFLICT (tenant, name) DO UPDATE SET card = EXCLUDED.card, style = EXCLUDED.style, heartbeat_at = EXCLUDED.heartbeat_at,
         registration = a2a_agents.registration + 1, updated_at = now()
       RETURNING ${COLUMNS}, (xmax = 0) AS inserted`,
      [tenant, name, JSON.stringify(card), style, maxPerTenant],
    );
    return rows.length === 0 ? undefined : { agent: agentOf(rows[0]), created: rows[0].inserted };
  }

  /** Whether the tenant may register this agent: it has fewer than `maxPerTenant`, or this one is among them. */
  async fits(tenant: string, name: string, maxPerTenant: number): Promise<boolean> {
    const [row]: { fits: boolean }[] = await this.db.query(`SELECT ${FITS} AS fits`, [tenant, name, maxPerTenant]);
    return row.fits;
  }

  async get(tenant: string, name: string): Promise<StoredAgentRow<Card> | undefined> {
    const rows: RawAgent<Card>[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_agents WHERE tenant = $1 AND name = $2`,
      [tenant, name],
    );
    return rows.length === 0 ? undefined : agentOf(rows[0]);
  }

  /**
   * A subscriber agent's liveness heartbeat: `recorded`; `unknown` when the tenant has no subscriber agent by that
   * name; `stale` (nothing written) when it names a registration older than the agent's, so a replica of a replaced
   * registration does not keep the new one's card alive. A heartbeat naming no registration is taken as the current one's.
   */
  async heartbeat(tenant: string, name: string, registration?: number): Promise<'recorded' | 'unknown' | 'stale'> {
    const [row]: { current: number; recorded: boolean }[] = await this.db.query(
      `WITH agent AS (SELECT registration FROM a2a_agents WHERE tenant = $1 AND name = $2 AND style = 'subscriber'),
            beat AS (UPDATE a2a_agents SET heartbeat_at = now()
                      WHERE tenant = $1 AND name = $2 AND style = 'subscriber' AND ($3::int IS NULL OR registration = $3)
                      RETURNING 1)
       SELECT (SELECT registration FROM agent) AS current, EXISTS (SELECT 1 FROM beat) AS recorded`,
      [tenant, name, registration ?? null],
    );
    if (row.recorded) return 'recorded';
    return row.current === null ? 'unknown' : 'stale';
  }

  /** Removes the agent; false when the tenant has none by that name. Its tasks stay (readable by id). */
  async delete(tenant: string, name: string): Promise<boolean> {
    // TypeORM answers a DELETE on Postgres with [rows, affected].
    const [, affected]: [unknown[], number] = await this.db.query(
      `DELETE FROM a2a_agents WHERE tenant = $1 AND name = $2`,
      [tenant, name],
    );
    return affected > 0;
  }

  /** The tenant's agents by name, filtered by a skill id or a skill tag. */
  async list(tenant: string, filter: AgentFilter = {}): Promise<StoredAgentRow<Card>[]> {
    // jsonb holds no NUL (`\u0000`): a filter with one matches no card (and Postgres would refuse the query).
    if ([filter.skill, filter.tag].some((v) => v?.includes('\0'))) return [];
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
    const rows: RawAgent<Card>[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_agents WHERE ${where.join(' AND ')} ORDER BY name`,
      params,
    );
    return rows.map((r) => agentOf(r));
  }

  /** Whether the tenant has an agent by that name (its topics are served while it has). */
  async exists(tenant: string, name: string): Promise<boolean> {
    return (await this.db.query(`SELECT 1 FROM a2a_agents WHERE tenant = $1 AND name = $2`, [tenant, name])).length > 0;
  }
}
