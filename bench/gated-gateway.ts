import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { benchEnv, startInstanceProcess } from './support';

/** What a gated gateway is started with, beyond its topic. */
export interface GatedGatewayOptions {
  instanceId: string;
  /** The default audit sink (a log line) records every decision (`ALL`) or refusals only (`DENIALS`). */
  audit: 'ALL' | 'DENIALS';
  /** The tenant the tokens name. */
  tenant: string;
  /** A CloudEvent (JSON) the gateway is probed with until the ACL rule applies. */
  probe: string;
  /** More settings (a quota, its sync period). */
  env?: Record<string, string>;
}

/**
 * A gateway-only instance with the gate on and enforcing: TokenAuth trusting an ES256 key made for it (a keys
 * file), an ACL whose default is DENY with one rule that allows the tenant to publish to the topic (created through
 * the admin API, as an operator would), and the tenant's quota at 10 million events/s unless `env` sets another.
 * Resolves with the token to publish with.
 */
export async function gatedGateway(topic: string, options: GatedGatewayOptions) {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const keysFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'eventmesh-bench-')), 'jwks.json');
  writeFileSync(
    keysFile,
    JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'bench', alg: 'ES256', use: 'sig' }] }),
  );
  const mint = (scope: string) =>
    new SignJWT({ tenant: options.tenant, scope })
      .setProtectedHeader({ alg: 'ES256', kid: 'bench', typ: 'at+jwt' })
      .setIssuer('eventmesh-bench')
      .setAudience('eventmesh')
      .setSubject('bench-publisher')
      .setIssuedAt()
      .setExpirationTime('2h')
      .sign(privateKey);
  const instance = await startInstanceProcess(
    benchEnv({
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_INSTANCE_ROLES: 'gateway',
      EVENTMESH_HTTP_PORT: '0',
      EVENTMESH_INSTANCE_ID: options.instanceId,
      EVENTMESH_SECURITY_GATE_AUDIT_RECORD: options.audit,
      EVENTMESH_SECURITY_GATE_FILTERS: 'token,acl,quota',
      EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
      EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: keysFile,
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: 'eventmesh-bench',
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: 'eventmesh',
      EVENTMESH_SECURITY_GATE_ACL_DEFAULT: 'DENY',
      EVENTMESH_SECURITY_GATE_QUOTA_EVENTS_PER_SECOND: '10000000',
      EVENTMESH_SECURITY_GATE_QUOTA_BYTES_PER_SECOND: String(100 * 1024 ** 3),
      EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
      EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
      EVENTMESH_ADMIN_SECURITY_OPERATOR_TENANT: options.tenant,
      ...options.env,
    }),
  );
  const rule = await fetch(`${instance.url}/admin/acl/rules`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${await mint('admin')}` },
    body: JSON.stringify({ subject: 'tenant:*', action: 'publish', topic, effect: 'ALLOW' }),
  });
  if (rule.status !== 201) throw new Error(`the ACL rule was refused: ${rule.status} ${await rule.text()}`);
  const authorization = `Bearer ${await mint('publish')}`;
  // The rule applies once the filter's next refresh has read it (EVENTMESH_SECURITY_GATE_ACL_REFRESH_MS).
  const deadline = Date.now() + 10000;
  for (;;) {
    const probe = await fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json', authorization },
      body: options.probe,
    });
    if (probe.status === 202) break;
    if (Date.now() > deadline)
      throw new Error(`the gated gateway still refuses the publisher: ${probe.status} ${await probe.text()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { ...instance, authorization };
}
