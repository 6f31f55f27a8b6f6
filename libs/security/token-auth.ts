import type { DataSource } from 'typeorm';
import type { EventMeshConfig } from '@libs/config';
import { SCOPE_OF } from './caller';
import { ApiKeyStore } from '@libs/storage';
import { ApiKeyUsage } from './api-key-usage';
import { ApiKeyVerifier } from './api-key-verifier';
import { credentialOf } from './bearer-credential';
import type { GateContext, GateFilter, GateRequest, Verdict } from './gate-filter';
import { tokenKeySource } from './jwt-key-source';
import { JwtVerifier } from './jwt-verifier';
import {
  Authentication,
  duplicateCredential,
  insufficientScope,
  invalidToken,
  missingCredential,
  notOperator,
} from './token-refusals';

export interface TokenAuthOptions {
  jwt: JwtVerifier;
  apiKeys: ApiKeyVerifier;
  /** config.admin.security.operatorTenant: whose admins may call runtime-wide routes. */
  operatorTenant: string;
  /** Stopped with the filter (the API keys' last-used writer). */
  usage?: ApiKeyUsage;
}

/**
 * The gate's first filter: who is calling. A bearer JWT or an API key (bearer-credential.ts) names the caller;
 * then the caller must hold the scope of the route's action (403 `insufficient_scope`), and a runtime-wide admin
 * route wants the operator tenant (403 `not_operator`). Nothing sent: 401 with a bare `Bearer` challenge; a bad
 * credential: 401 `invalid_token` saying what is wrong with it. A credential seen before answers from the
 * verifiers' caches without a promise, so the publish path pays a lookup.
 */
export class TokenAuth implements GateFilter {
  readonly name = 'token' as const;

  constructor(private readonly options: TokenAuthOptions) {}

  /** The filter as configured: keys file read now (a bad one stops the boot), JWKS fetched on first use. */
  static fromConfig(config: EventMeshConfig, db: DataSource): TokenAuth {
    const token = config.security.gate.token;
    const store = new ApiKeyStore(db);
    const usage = new ApiKeyUsage(store);
    return new TokenAuth({
      jwt: new JwtVerifier(token, tokenKeySource(token)),
      apiKeys: new ApiKeyVerifier(store, usage, { cacheMs: token.apiKeyCacheMs, maxEntries: token.cacheMaxEntries }),
      operatorTenant: config.admin.security.operatorTenant,
      usage,
    });
  }

  check({ request }: GateContext): Verdict | Promise<Verdict> {
    const credential = credentialOf(request.headers);
    let authentication: Authentication | Promise<Authentication>;
    switch (credential.kind) {
      case 'none':
        return { allow: false, refusal: missingCredential() };
      case 'malformed':
        return { allow: false, refusal: invalidToken('malformed', credential.description) };
      case 'duplicate':
        return { allow: false, refusal: duplicateCredential(credential.header) };
      case 'jwt':
        authentication = this.options.jwt.verify(credential.token);
        break;
      case 'api-key':
        authentication = this.options.apiKeys.verify(credential.key);
        break;
    }
    return authentication instanceof Promise
      ? authentication.then((a) => this.decide(request, a))
      : this.decide(request, authentication);
  }

  async close(): Promise<void> {
    await this.options.usage?.close();
  }

  private decide(request: GateRequest, authentication: Authentication): Verdict {
    if (!authentication.ok)
      return { allow: false, refusal: invalidToken(authentication.reason, authentication.description) };
    const caller = authentication.caller;
    // The caller is known though refused: audited as itself, and report-only mode proceeds as it.
    const scope = SCOPE_OF[request.action];
    const scoped = request.connection
      ? caller.scopes.includes('publish') || caller.scopes.includes('subscribe')
      : caller.scopes.includes(scope);
    if (!scoped) return { allow: false, refusal: insufficientScope(scope), caller };
    if (request.operatorOnly && caller.tenant !== this.options.operatorTenant)
      return { allow: false, refusal: notOperator(), caller };
    return { allow: true, caller };
  }
}
