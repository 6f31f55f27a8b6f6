import { z } from 'zod';
import { randomBytes, randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { PublisherSecretRows } from '@libs/storage';
import { SecretBox } from './secret-box';

/** A publisher secret as the admin API lists it: never the secret itself. */
export interface PublisherSecretView {
  id: string;
  principal: string;
  createdAt: string;
}

/** At most this many secrets per principal: the current one and the next, while publishers move to it. */
export const MAX_PUBLISHER_SECRETS = 2;

/** The longest principal name a secret can be registered for. */
const MAX_PRINCIPAL_CHARS = 256;

/** The HMAC key of a Standard Webhooks secret: the bytes after `whsec_`, base64-decoded. */
export function signingKeyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

/**
 * Publisher signing secrets (SignatureVerifier, docs/security.md), per tenant and principal, sealed by the
 * {@link SecretBox}. A principal with secrets must sign every publish; with none it publishes unsigned. Two
 * secrets at most, so a secret rotates without a gap: add the next, move the publishers to it, delete the old.
 * Each write says what it changed or why it refused: a third secret is refused (409 SECRET_LIMIT_REACHED), an
 * unknown id is 404 for this tenant whether or not another tenant has it.
 */
export class PublisherSecretStore {
  private readonly log = createLogger('PublisherSecretStore');
  private readonly rows: PublisherSecretRows;

  constructor(
    db: DataSource,
    private readonly box: SecretBox,
  ) {
    this.rows = new PublisherSecretRows(db);
  }

  /** Creates a secret; the answer is the only time the secret is shown. */
  async create(tenant: string, principal: string): Promise<PublisherSecretView & { secret: string }> {
    checkPrincipal(principal);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const id = randomUUID();
    const createdAt = await this.rows.insertBelow(MAX_PUBLISHER_SECRETS, {
      id,
      tenant,
      principal,
      sealed: this.box.seal(secret),
    });
    if (createdAt === undefined) {
      throw new EventMeshError(
        ErrorCode.SecretLimitReached,
        `principal ${principal} already has ${MAX_PUBLISHER_SECRETS} secrets (the current one and the next); delete one first`,
        { principal, max: MAX_PUBLISHER_SECRETS },
      );
    }
    this.log.info({ tenant, principal, secretId: id }, 'publisher secret created');
    return { id, principal, createdAt: createdAt.toISOString(), secret };
  }

  async list(tenant: string, principal: string): Promise<PublisherSecretView[]> {
    checkPrincipal(principal);
    const rows = await this.rows.list(tenant, principal);
    return rows.map((r) => ({ id: r.id, principal: r.principal, createdAt: r.createdAt.toISOString() }));
  }

  /** Deletes one secret of the principal; 404 when this tenant's principal has none by that id. */
  async delete(tenant: string, principal: string, id: string): Promise<void> {
    checkPrincipal(principal);
    if (!(UUID.test(id) && (await this.rows.delete(tenant, principal, id)))) {
      throw new EventMeshError(ErrorCode.NotFound, `principal ${principal} has no secret ${id}`, { principal, id });
    }
    this.log.info({ tenant, principal, secretId: id }, 'publisher secret deleted');
  }

  /**
   * The HMAC keys of the principal's secrets, opened. A secret that does not open (its key left
   * EVENTMESH_SECURITY_SECRETS_KEYS) is logged and left out: its signatures fail, nothing passes unsigned.
   */
  async keysOf(tenant: string, principal: string): Promise<{ count: number; keys: Buffer[] }> {
    const rows = await this.rows.sealedOf(tenant, principal);
    const keys: Buffer[] = [];
    for (const row of rows) {
      try {
        keys.push(signingKeyOf(this.box.open(row.secret)));
      } catch (e) {
        this.log.error(
          { tenant, principal, secretId: row.id, error: (e as Error).message },
          'publisher secret cannot be opened; its signatures are refused',
        );
      }
    }
    return { count: rows.length, keys };
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A publisher's principal in the admin API's paths: 1 to 256 characters (code points), no control characters. */
export const publisherPrincipalSchema = z
  .string()
  .regex(new RegExp(`^[^\\x00-\\x1f]{1,${MAX_PRINCIPAL_CHARS}}$`, 'u'))
  .describe(`the publisher (its principal): 1 to ${MAX_PRINCIPAL_CHARS} characters, no control characters`);

function checkPrincipal(principal: string): void {
  if (!publisherPrincipalSchema.safeParse(principal).success) {
    throw new EventMeshError(
      ErrorCode.InvalidRequest,
      `principal: 1 to ${MAX_PRINCIPAL_CHARS} characters, no control characters`,
      { field: 'principal' },
    );
  }
}
