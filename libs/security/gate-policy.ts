/**
 * The one request gate every ingress route passes through (HTTP routes now; stream handshakes and admin routes
 * as they arrive). Authentication, ACLs and quotas plug in here as policies; until then the policy admits all.
 */
export interface GateRequest {
  /** The route as declared, e.g. `POST /events/publish`. */
  route: string;
  headers: Record<string, string | string[] | undefined>;
  remoteAddress: string;
}

/** An abstract class rather than an interface, so it can be the injection token too. */
export abstract class GatePolicy {
  /** Resolves when the request may proceed; throws an EventMeshError (401, 403, 429) when it may not. */
  abstract admit(request: GateRequest): Promise<void> | void;
}

export class AdmitAllPolicy extends GatePolicy {
  admit(): void {
    /* no authentication, ACL or quota is configured yet */
  }
}
