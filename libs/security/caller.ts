/** The actions a caller is granted (token scopes) and the ACL decides on. */
export const ACTIONS = ['publish', 'subscribe', 'admin'] as const;
export type Action = (typeof ACTIONS)[number];

/** The tenant of a caller the gate could not (or did not) authenticate, and of every resource of an open gate. */
export const DEFAULT_TENANT = 'default';

/** Who a request comes from, as the gate's TokenAuth established it. */
export interface Caller {
  /** The principal: the token's principal claim, or the API key's principal; `anonymous` when unauthenticated. */
  principal: string;
  /** Every resource the caller creates carries this tenant; it sees and changes only its tenant's resources. */
  tenant: string;
  scopes: readonly Action[];
  /** How the caller was authenticated. */
  via: 'jwt' | 'api-key' | 'none';
}

/** The caller of every request of an open gate (the development default): it may do anything, as before a gate existed. */
export const ANONYMOUS: Caller = Object.freeze({
  principal: 'anonymous',
  tenant: DEFAULT_TENANT,
  scopes: ACTIONS,
  via: 'none' as const,
});

/**
 * The caller of a gate that is on but did not authenticate the request (report-only mode after a refusal, or a
 * gate without TokenAuth): it keeps the data path (publish, subscribe) of tenant `default`, never the admin scope,
 * so a garbage token cannot reach what only an admin of the operator tenant may do (`config.trusted`).
 */
export const UNAUTHENTICATED: Caller = Object.freeze({
  principal: 'anonymous',
  tenant: DEFAULT_TENANT,
  scopes: Object.freeze(['publish', 'subscribe'] as Action[]),
  via: 'none' as const,
});
