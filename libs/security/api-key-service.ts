import { z } from 'zod';
import { TENANT_NAME } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { ApiKeyStore, ApiKeyView } from '@libs/storage';
import { isApiKeyId, newApiKeyCredential } from './api-key-credential';
import { ACTIONS, Caller } from './caller';

/** `POST /admin/api-keys`. */
export const createApiKeySchema = z
  .object({
    /** What the key is for, for people. */
    name: z.string().trim().min(1).max(128),
    /** Who the key acts as (audited): the caller's own principal, the only one allowed; absent means the same. */
    principal: z.string().trim().min(1).max(256).optional(),
    scopes: z.array(z.enum(ACTIONS)).min(1),
    /** The caller's own tenant, the only one allowed (kept so an older client naming it still works). */
    tenant: z.string().regex(TENANT_NAME, 'a tenant: 1 to 64 characters of [A-Za-z0-9._-]').optional(),
  })
  .strict();
export type CreateApiKeyRequest = z.infer<typeof createApiKeySchema>;

/** An API key as the admin API shows it: never its secret or hash. */
export interface ApiKeyResource {
  id: string;
  name: string;
  tenant: string;
  principal: string;
  scopes: string[];
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

/** The answer to a creation: the key itself, shown this once. */
export interface CreatedApiKey extends ApiKeyResource {
  /** `emk_<id>_<secret>`: send it as `Authorization: Bearer <key>` or `x-api-key: <key>`. Not shown again. */
  key: string;
}

/**
 * The admin API's API keys: created for the caller's tenant, within its scopes and as its principal; listed and
 * revoked within a tenant (an admin of the operator tenant may name another); another tenant's key answers 404, as
 * no key at all.
 */
export class ApiKeyService {
  constructor(
    private readonly store: ApiKeyStore,
    private readonly operatorTenant: string,
  ) {}

  /**
   * A key is bounded by whoever mints it: its tenant, at most its scopes, and its principal (so a DENY rule naming
   * the caller holds its keys too). Anything wider would let a key do what its minter may not; even the operator
   * tenant's admins mint only their own tenant's keys (another tenant's come from its own admins, or a JWT).
   */
  async create(caller: Caller, request: CreateApiKeyRequest): Promise<CreatedApiKey> {
    if (request.tenant !== undefined && request.tenant !== caller.tenant) {
      throw new EventMeshError(ErrorCode.Forbidden, "an API key is minted for the caller's own tenant only", {
        field: 'tenant',
        reason: 'beyond_caller',
      });
    }
    const wider = request.scopes.filter((s) => !caller.scopes.includes(s));
    if (wider.length > 0) {
      throw new EventMeshError(ErrorCode.Forbidden, `scopes: the caller does not hold ${wider.join(', ')}`, {
        field: 'scopes',
        reason: 'beyond_caller',
      });
    }
    if (request.principal !== undefined && request.principal !== caller.principal) {
      throw new EventMeshError(ErrorCode.Forbidden, 'principal: an API key acts as the caller that minted it', {
        field: 'principal',
        reason: 'beyond_caller',
      });
    }
    const tenant = caller.tenant;
    const credential = newApiKeyCredential();
    const stored = await this.store.create({
      id: credential.id,
      tenant,
      principal: caller.principal,
      name: request.name,
      scopes: ACTIONS.filter((a) => request.scopes.includes(a)),
      secretHash: credential.secretHash,
    });
    return { ...resourceOf(stored), key: credential.token };
  }

  async list(caller: Caller, tenant?: string): Promise<ApiKeyResource[]> {
    return (await this.store.list(this.tenantFor(caller, tenant))).map(resourceOf);
  }

  async revoke(caller: Caller, id: string, tenant?: string): Promise<void> {
    const owner = this.tenantFor(caller, tenant);
    const result = isApiKeyId(id)
      ? await this.store.revoke(id, owner)
      : { applied: false, rejected: 'NOT_FOUND' as const };
    // Revoked now or before, the answer is the same: the key authenticates nothing any more once every instance's
    // cached read of it is older than apiKeyCacheMs.
    if (result.rejected === 'NOT_FOUND') throw new EventMeshError(ErrorCode.NotFound, `no API key ${id}`, { id });
  }

  /** The tenant a request acts on: the caller's, or the one it names if it is the operator's admin. */
  private tenantFor(caller: Caller, named: string | undefined): string {
    if (named === undefined || named === caller.tenant) return caller.tenant;
    if (!TENANT_NAME.test(named))
      throw new EventMeshError(ErrorCode.InvalidRequest, 'tenant: 1 to 64 characters of [A-Za-z0-9._-]', {
        field: 'tenant',
      });
    if (caller.tenant !== this.operatorTenant) {
      throw new EventMeshError(
        ErrorCode.Forbidden,
        "only an admin of the operator tenant may act on another tenant's API keys",
        { field: 'tenant' },
      );
    }
    return named;
  }
}

function resourceOf(key: ApiKeyView): ApiKeyResource {
  return {
    id: key.id,
    name: key.name,
    tenant: key.tenant,
    principal: key.principal,
    scopes: key.scopes,
    createdAt: key.createdAt.toISOString(),
    revokedAt: key.revokedAt?.toISOString() ?? null,
    lastUsedAt: key.lastUsedAt?.toISOString() ?? null,
  };
}
