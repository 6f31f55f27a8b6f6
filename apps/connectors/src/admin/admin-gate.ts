import type { FastifyRequest } from 'fastify';
import type { DataSource } from 'typeorm';
import type { EventMeshConfig } from '@libs/config';
import { adminFiltersOf, ANONYMOUS, Caller, LoggingAuditSink, SecurityGate, TokenAuth } from '@libs/security';
import { ConfigFieldError } from '../spi';

/**
 * The admin gate of the connector runtime: the security gate library of the event runtime with the same settings
 * as its admin API (EVENTMESH_ADMIN_SECURITY_FILTERS, ..._FAIL_CLOSED, the token keys, the operator tenant) and
 * the same API keys and ACL rules (the `admin` action), so one operator token (or a tenant admin's) works for both
 * and an ACL rule denying a caller the admin action denies it here too. Every decision is audited to the log.
 */
export class AdminGate {
  private readonly gate: SecurityGate;
  private readonly token?: TokenAuth;

  constructor(shared: EventMeshConfig, db: DataSource) {
    const security = shared.admin.security;
    const filters = adminFiltersOf(shared, db);
    this.token = filters.find((f): f is TokenAuth => f instanceof TokenAuth);
    this.gate = new SecurityGate({
      name: 'connectors-admin',
      filters,
      failClosed: security.failClosed,
      audit: new LoggingAuditSink(),
      auditAllows: true,
    });
  }

  get mode(): string {
    return this.gate.stats().mode;
  }

  /** The caller of an admin request (throws the gate's refusal). */
  async admit(request: FastifyRequest, route: string): Promise<Caller> {
    const admission = await this.gate.admit({
      route,
      action: 'admin',
      headers: request.headers,
      remoteAddress: request.ip,
      privileged: true,
    });
    admission.release();
    return admission.caller;
  }

  /**
   * The tenant a job's mesh credential belongs to, as the event runtime's TokenAuth reads it (the anonymous
   * tenant when no TokenAuth runs here: an open gate). A credential TokenAuth refuses (none, malformed, unknown,
   * expired, revoked, without the publish scope) is the job's config refused, not the admin caller: a
   * {@link ConfigFieldError} naming `mesh.apiKey`, `mesh.token`, or `mesh` when none was given.
   */
  async tenantOf(credential: { apiKey?: string; token?: string }): Promise<string | undefined> {
    if (!this.token) return ANONYMOUS.tenant;
    const headers = credential.apiKey
      ? { 'x-api-key': credential.apiKey }
      : credential.token
        ? { authorization: `Bearer ${credential.token}` }
        : {};
    const verdict = await this.token.check({
      request: { route: 'POST /admin/jobs', action: 'publish', headers, remoteAddress: '127.0.0.1' },
      caller: ANONYMOUS,
    });
    if (!verdict.allow) {
      if (credential.apiKey) throw new ConfigFieldError('mesh.apiKey', `refused: ${verdict.refusal.message}`);
      if (credential.token) throw new ConfigFieldError('mesh.token', `refused: ${verdict.refusal.message}`);
      throw new ConfigFieldError('mesh', "expected { apiKey } or { token }, a credential of the caller's tenant");
    }
    return verdict.caller?.tenant;
  }

  async close(): Promise<void> {
    await this.gate.close();
  }
}
