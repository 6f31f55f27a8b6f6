import type { DataSource } from 'typeorm';

/** An API key as stored: never its secret, only the secret's SHA-256. */
export interface StoredApiKey {
  id: string;
  tenant: string;
  principal: string;
  name: string;
  scopes: string[];
  secretHash: Buffer;
  createdAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

/** What a listing shows of a key: everything but the hash. */
export type ApiKeyView = Omit<StoredApiKey, 'secretHash'>;

export type NewApiKey = Pick<StoredApiKey, 'id' | 'tenant' | 'principal' | 'name' | 'scopes' | 'secretHash'>;

/** Why a revocation changed nothing: the tenant has no key by that id, or the key was revoked before. */
export type ApiKeyRevokeRejection = 'NOT_FOUND' | 'ALREADY_REVOKED';

export interface ApiKeyRevokeResult {
  applied: boolean;
  rejected?: ApiKeyRevokeRejection;
  /** When the key was revoked (by this write or the earlier one); absent when NOT_FOUND. */
  revokedAt?: Date;
}

/** One use of a key, for its `last_used_at`. */
export interface ApiKeyUse {
  id: string;
  at: Date;
}

/** The least time between two writes of one key's `last_used_at`, on every instance together. */
export const API_KEY_LAST_USED_RESOLUTION_SECONDS = 60;

interface Row {
  id: string;
  tenant: string;
  principal: string;
  name: string;
  scopes: string[];
  secret_hash: Buffer;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

const COLUMNS = 'id, tenant, principal, name, scopes, secret_hash, created_at, revoked_at, last_used_at';

const stored = (r: Row): StoredApiKey => ({
  id: r.id,
  tenant: r.tenant,
  principal: r.principal,
  name: r.name,
  scopes: r.scopes,
  secretHash: r.secret_hash,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
  lastUsedAt: r.last_used_at,
});

const view = ({ secretHash, ...rest }: StoredApiKey): ApiKeyView => {
  void secretHash;
  return rest;
};

/**
 * API keys in Postgres (`api_keys`). A key is created once, read by id on every authentication the verifier's
 * cache does not answer, revoked once (a revocation keeps the row and its first `revoked_at`), and marked used in
 * batches. Every read and write but `find` is scoped by tenant: another tenant's key reads as no key at all.
 */
export class ApiKeyStore {
  constructor(private readonly db: DataSource) {}

  async create(key: NewApiKey): Promise<StoredApiKey> {
    const rows: Row[] = await this.db.query(
      `INSERT INTO api_keys (id, tenant, principal, name, scopes, secret_hash) VALUES ($1, $2, $3, $4, $5::text[], $6) RETURNING ${COLUMNS}`,
      [key.id, key.tenant, key.principal, key.name, key.scopes, key.secretHash],
    );
    return stored(rows[0]);
  }

  /** The key with this id, whatever its tenant (authentication: the id is the credential's public part). */
  async find(id: string): Promise<StoredApiKey | undefined> {
    const rows: Row[] = await this.db.query(`SELECT ${COLUMNS} FROM api_keys WHERE id = $1`, [id]);
    return rows.length > 0 ? stored(rows[0]) : undefined;
  }

  /** The tenant's keys, revoked ones included, oldest first; never a hash. */
  async list(tenant: string): Promise<ApiKeyView[]> {
    const rows: Row[] = await this.db.query(
      `SELECT ${COLUMNS} FROM api_keys WHERE tenant = $1 ORDER BY created_at, id`,
      [tenant],
    );
    return rows.map((r) => view(stored(r)));
  }

  /** Revokes the tenant's key: applied once; again, it says ALREADY_REVOKED and keeps the first time. */
  async revoke(id: string, tenant: string): Promise<ApiKeyRevokeResult> {
    const rows: { found: boolean; revoked_now: Date | null; revoked_before: Date | null }[] = await this.db.query(
      `WITH target AS (
         SELECT id, revoked_at FROM api_keys WHERE id = $1 AND tenant = $2 FOR UPDATE
       ), revoked AS (
         UPDATE api_keys k SET revoked_at = now() FROM target t WHERE k.id = t.id AND t.revoked_at IS NULL RETURNING k.revoked_at
       )
       SELECT EXISTS (SELECT 1 FROM target) AS found,
              (SELECT revoked_at FROM revoked) AS revoked_now,
              (SELECT revoked_at FROM target) AS revoked_before`,
      [id, tenant],
    );
    const r = rows[0];
    if (!r.found) return { applied: false, rejected: 'NOT_FOUND' };
    if (r.revoked_now) return { applied: true, revokedAt: r.revoked_now };
    return { applied: false, rejected: 'ALREADY_REVOKED', revokedAt: r.revoked_before ?? undefined };
  }

  /**
   * Writes the keys' `last_used_at`, one statement for the batch. A key's time is written only when it moves at
   * least API_KEY_LAST_USED_RESOLUTION_SECONDS forward, so however many instances report a busy key, its row is
   * written at most about once a minute, and never backwards. Answers the ids it wrote.
   */
  async recordUse(uses: ApiKeyUse[]): Promise<string[]> {
    if (uses.length === 0) return [];
    const latest = new Map<string, Date>();
    for (const u of uses) if (!latest.has(u.id) || latest.get(u.id)! < u.at) latest.set(u.id, u.at);
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected].
    const [rows]: [{ id: string }[], number] = await this.db.query(
      `UPDATE api_keys k SET last_used_at = u.at
         FROM unnest($1::text[], $2::timestamptz[]) AS u(id, at)
        WHERE k.id = u.id
          AND (k.last_used_at IS NULL OR k.last_used_at <= u.at - make_interval(secs => $3))
       RETURNING k.id`,
      [[...latest.keys()], [...latest.values()], API_KEY_LAST_USED_RESOLUTION_SECONDS],
    );
    return rows.map((r) => r.id);
  }
}
