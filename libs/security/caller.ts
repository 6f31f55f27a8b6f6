/** The actions a caller is granted (token scopes) and the ACL decides on. */
export const ACTIONS = ['publish', 'subscribe', 'admin'] as const;
export type Action = (typeof ACTIONS)[number];

/**
 * The actions of streaming sessions (docs/streaming-sessions.md#security), which the ACL decides on an agent's or a
 * session's name as on a topic: serving an agent name, calling it, publishing to a named session and subscribing to
 * it. They are not scopes of their own: each needs the data-path scope it implies ({@link SCOPE_OF}).
 */
export const SESSION_ACTIONS = ['agent.serve', 'agent.call', 'session.publish', 'session.subscribe'] as const;
export type SessionAction = (typeof SESSION_ACTIONS)[number];

/** Every action the gate decides: the scopes' and the sessions'. */
export type GateAction = Action | SessionAction;
export const GATE_ACTIONS: readonly GateAction[] = [...ACTIONS, ...SESSION_ACTIONS];

/**
 * The scope an action needs: its own for a scope; for a session action, `publish` for what writes into the mesh
 * (calling an agent, publishing to a session) and `subscribe` for what reads from it (serving an agent: it takes
 * calls; subscribing to a session).
 */
export const SCOPE_OF: Readonly<Record<GateAction, Action>> = Object.freeze({
  publish: 'publish',
  subscribe: 'subscribe',
  admin: 'admin',
  'agent.serve': 'subscribe',
  'agent.call': 'publish',
  'session.publish': 'publish',
  'session.subscribe': 'subscribe',
});

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
