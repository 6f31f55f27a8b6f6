import {
  Client,
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { ErrorCode } from '@libs/errors';
import {
  ACTIONS,
  DEFAULT_TENANT,
  GateContext,
  GateFilter,
  GateRefusal,
  LoggingAuditSink,
  SecurityGate,
  Verdict,
} from '@libs/security';

/**
 * The gate's TokenAuth stand-in: the caller's tenant comes from `x-test-tenant` (every action allowed to it). It
 * authenticates everyone: without the header the caller is tenant `default`'s admin, as an open gate's is.
 */
export class HeaderTenantFilter implements GateFilter {
  readonly name = 'token';
  check({ request }: GateContext): Verdict {
    const header = request.headers['x-test-tenant'];
    const tenant = typeof header === 'string' ? header : DEFAULT_TENANT;
    return {
      allow: true,
      caller: {
        principal: typeof header === 'string' ? `svc-${tenant}` : 'anonymous',
        tenant,
        scopes: ACTIONS,
        via: 'jwt',
      },
    };
  }
}

/**
 * A stand-in for TokenAuth that can also refuse: the caller is whoever the `x-test-principal` and `x-test-tenant`
 * headers say (every action allowed); no principal is a 401. First in the chain, like TokenAuth.
 */
export class HeaderToken implements GateFilter {
  readonly name = 'token' as const;
  check({ request }: GateContext): Verdict {
    const principal = request.headers['x-test-principal'];
    const tenant = request.headers['x-test-tenant'];
    if (typeof principal !== 'string')
      return { allow: false, refusal: new GateRefusal(ErrorCode.Unauthenticated, 'no principal', 'no_token') };
    return {
      allow: true,
      caller: { principal, tenant: typeof tenant === 'string' ? tenant : DEFAULT_TENANT, scopes: ACTIONS, via: 'jwt' },
    };
  }
}

/** A fail-closed gate of that one filter, auditing its refusals to the log. */
export function headerTenantGate(name: string): SecurityGate {
  return new SecurityGate({
    name,
    filters: [new HeaderTenantFilter()],
    failClosed: true,
    audit: new LoggingAuditSink(),
    auditAllows: false,
  });
}

/** `fetch` as the tenant: every request carries its `x-test-tenant` header (the stock A2A client's transport). */
export function tenantFetch(tenant: string): typeof fetch {
  return ((input: string | URL | Request, init?: RequestInit) =>
    fetch(input, {
      ...init,
      headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), 'x-test-tenant': tenant },
    })) as typeof fetch;
}

/** The stock A2A v1.0 client of the agent whose card the mesh serves at `cardUrl`, calling as the tenant. */
export function stockClientOf(
  cardUrl: string,
  tenant: string,
  transport: 'jsonrpc' | 'rest' = 'jsonrpc',
): Promise<Client> {
  const fetchImpl = tenantFetch(tenant);
  const transports = [
    transport === 'rest' ? new RestTransportFactory({ fetchImpl }) : new JsonRpcTransportFactory({ fetchImpl }),
  ];
  return new ClientFactory({ transports, cardResolver: new DefaultAgentCardResolver({ fetchImpl }) }).createFromUrl(
    cardUrl,
    '',
  );
}

/** A JSON call to a gateway as the tenant: the status, and the body parsed (null when empty). */
export async function callAs(
  tenant: string,
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> | null }> {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { 'x-test-tenant': tenant, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) };
}
