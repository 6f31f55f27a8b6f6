import type { DataSource } from 'typeorm';
import type { EventMeshConfig } from '@libs/config';
import type { EventProducer } from '@libs/kafka';
import { AclRuleStore, QuotaUsageStore, TenantQuotaStore } from '@libs/storage';
import { AclFilter } from './acl-filter';
import { AuditSink, LoggingAuditSink } from './audit-sink';
import { CloudEventsAuditSink } from './cloudevents-audit-sink';
import type { GateFilter } from './gate-filter';
import { PublisherSecretStore } from './publisher-secrets';
import { SecretBox } from './secret-box';
import { SignatureReplayLedger, SignatureVerifier } from './signature-verifier';
import { SecurityGate } from './security-gate';
import { TokenAuth } from './token-auth';
import { TenantQuotaFilter } from './tenant-quota-filter';

/** What the gates' filters read and write: Postgres (API keys, ACL rules, quotas, replay ids) and Kafka (audit events). */
export interface GateDependencies {
  db: DataSource;
  producer: EventProducer;
  instanceId: string;
  /** Filters handed in take the place of those the configuration would build (tests: a stand-in TokenAuth). */
  filters?: Partial<Record<FilterName, GateFilter>>;
}

export interface BuiltGates {
  ingress: SecurityGate;
  admin: SecurityGate;
  close(): Promise<void>;
}

type FilterName = EventMeshConfig['security']['gate']['filters'][number];

/**
 * The composition of the gates from configuration: the ingress gate runs TokenAuth, SignatureVerifier, ACL and
 * TenantQuota (those configured, in that order); the admin API's gate runs TokenAuth and ACL. Both share one
 * audit sink. An empty filter list is an open gate.
 */
export function buildGates(config: EventMeshConfig, deps: GateDependencies): BuiltGates {
  const audit = auditSinkOf(config, deps);
  const filters = new Map<FilterName, GateFilter>();
  const filterOf = (name: FilterName): GateFilter => {
    let filter = filters.get(name);
    if (!filter) {
      filter = deps.filters?.[name] ?? createFilter(name, config, deps);
      filters.set(name, filter);
    }
    return filter;
  };
  // Both gates share the filters (one TokenAuth, one ACL) and the audit sink. The admin gate audits every decision
  // (each is an operator's action); the ingress gate its refusals, or every decision when configured so.
  const gate = (name: string, names: readonly FilterName[], failClosed: boolean, auditAllows: boolean) =>
    new SecurityGate({ name, filters: names.map(filterOf), failClosed, audit, auditAllows });
  const ingress = gate(
    'ingress',
    config.security.gate.filters,
    config.security.gate.failClosed,
    config.security.gate.audit.record === 'ALL',
  );
  const admin = gate('admin', config.admin.security.filters, config.admin.security.failClosed, true);
  return {
    ingress,
    admin,
    async close() {
      for (const filter of filters.values()) await filter.close?.();
      await audit.close?.();
    },
  };
}

/**
 * The admin gate's filters as configured (EVENTMESH_ADMIN_SECURITY_FILTERS: TokenAuth, ACL), for a process
 * outside the runtime that serves an admin API of its own behind the same rules and credentials: the connector
 * runtime. They read Postgres only (API keys, ACL rules).
 */
export function adminFiltersOf(config: EventMeshConfig, db: DataSource): GateFilter[] {
  return config.admin.security.filters.map((name) =>
    name === 'acl' ? new AclFilter(new AclRuleStore(db), config.security.gate.acl) : TokenAuth.fromConfig(config, db),
  );
}

function createFilter(name: FilterName, config: EventMeshConfig, deps: GateDependencies): GateFilter {
  switch (name) {
    case 'acl':
      return new AclFilter(new AclRuleStore(deps.db), config.security.gate.acl);
    case 'quota': {
      const { syncMs, ...defaults } = config.security.gate.quota;
      return new TenantQuotaFilter(new TenantQuotaStore(deps.db), new QuotaUsageStore(deps.db), {
        instanceId: deps.instanceId,
        defaults,
        syncMs,
        refreshMs: config.security.gate.acl.refreshMs,
      });
    }
    case 'token':
      return TokenAuth.fromConfig(config, deps.db);
    case 'signature':
      return new SignatureVerifier(
        new PublisherSecretStore(deps.db, SecretBox.fromConfig(config)),
        new SignatureReplayLedger(deps.db),
        {
          toleranceSeconds: config.security.gate.signature.toleranceSeconds,
        },
      );
  }
}

function auditSinkOf(config: EventMeshConfig, deps: GateDependencies): AuditSink {
  const { sink, topic } = config.security.gate.audit;
  return sink === 'CLOUDEVENTS'
    ? new CloudEventsAuditSink(deps.producer, topic, deps.instanceId)
    : new LoggingAuditSink();
}

/** The boot log's and /health's plain statement of what the gates do. */
export function describeGates(
  gates: { ingress: SecurityGate; admin: SecurityGate },
  listenHost: string,
): { gate: string; admin: string; warnings: string[] } {
  const warnings: string[] = [];
  const exposed = !isLoopbackHost(listenHost);
  // Report-only lets refused requests through, so to whoever can reach the gateway it is as open as no gate at all
  // (but for the admin routes, which want an authenticated caller in every mode): warned of alike.
  const ingress = gates.ingress.stats().mode;
  const admin = gates.admin.stats().mode;
  if (exposed && ingress !== 'enforcing')
    warnings.push(
      `the request gate is ${ingress} and the gateway listens on ${listenHost}: anyone who can reach it may publish and subscribe`,
    );
  if (exposed && admin === 'open')
    warnings.push(
      `the admin API's gate is open and the gateway listens on ${listenHost}: anyone who can reach it may administer the runtime`,
    );
  if (exposed && admin === 'report-only') {
    warnings.push(
      `the admin API's gate is report-only and the gateway listens on ${listenHost}: its ACL refusals are only reported, so any authenticated admin may administer its tenant`,
    );
  }
  return { gate: ingress, admin, warnings };
}

export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
