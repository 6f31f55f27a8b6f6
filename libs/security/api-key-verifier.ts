import type { StoredApiKey } from '@libs/storage';
import { ApiKeyCredential, apiKeySecretMatches } from './api-key-credential';
import { ACTIONS, Caller } from './caller';
import { Authentication, authenticated, notAuthenticated } from './token-refusals';

/** What the verifier reads: `ApiKeyStore.find`. */
export interface ApiKeyLookup {
  find(id: string): Promise<StoredApiKey | undefined>;
}

/** Notes a use of a key (ApiKeyUsage): must not wait or throw. */
export interface ApiKeyUseRecorder {
  used(id: string): void;
}

interface Read {
  /** The stored key (undefined: no key by that id), and the caller it makes. */
  key: StoredApiKey | undefined;
  caller: Caller | undefined;
  readAt: number;
}

const UNKNOWN = notAuthenticated('unknown_key_id', 'the API key is not known');
const REVOKED = notAuthenticated('revoked_key', 'the API key has been revoked');

/**
 * API keys (`emk_<id>_<secret>`): the key is read by id, the secret's SHA-256 compared in constant time, a
 * revoked key refused. A read is trusted for `cacheMs` (a revocation takes effect on every instance within it),
 * so a busy key costs a hash and a map lookup; reads of the same id at the same time share one query. An unknown
 * id and a wrong secret are refused alike (`unknown_key_id`); only the holder of the secret hears it was revoked.
 * Throws only when the store cannot be read.
 */
export class ApiKeyVerifier {
  private readonly reads = new Map<string, Read>();
  private readonly inFlight = new Map<string, Promise<Read>>();

  constructor(
    private readonly store: ApiKeyLookup,
    private readonly usage: ApiKeyUseRecorder,
    private readonly options: { cacheMs: number; maxEntries: number; now?: () => number },
  ) {}

  verify(credential: ApiKeyCredential): Authentication | Promise<Authentication> {
    const read = this.reads.get(credential.id);
    if (read && this.now() - read.readAt < this.options.cacheMs) return this.decide(credential, read);
    return this.read(credential.id).then((r) => this.decide(credential, r));
  }

  private decide(credential: ApiKeyCredential, read: Read): Authentication {
    if (!read.key || !read.caller || !apiKeySecretMatches(credential.secret, read.key.secretHash)) return UNKNOWN;
    if (read.key.revokedAt) return REVOKED;
    this.usage.used(read.key.id);
    return authenticated(read.caller);
  }

  private read(id: string): Promise<Read> {
    let pending = this.inFlight.get(id);
    if (!pending) {
      pending = this.store
        .find(id)
        .then((key) => {
          const read: Read = { key, caller: key && callerOfKey(key), readAt: this.now() };
          if (this.options.cacheMs > 0) this.remember(id, read);
          return read;
        })
        .finally(() => this.inFlight.delete(id));
      this.inFlight.set(id, pending);
    }
    return pending;
  }

  private remember(id: string, read: Read): void {
    this.reads.delete(id);
    this.reads.set(id, read);
    while (this.reads.size > Math.max(1, this.options.maxEntries))
      this.reads.delete(this.reads.keys().next().value as string);
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }
}

function callerOfKey(key: StoredApiKey): Caller {
  return Object.freeze({
    principal: key.principal,
    tenant: key.tenant,
    scopes: ACTIONS.filter((a) => key.scopes.includes(a)),
    via: 'api-key' as const,
  });
}
