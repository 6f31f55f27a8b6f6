import { createAuditLog, isoNow } from '@libs/logging';
import type { GateAction } from './caller';

/** One gate decision, as audited. Never a body, a token or a secret. */
export interface AuditRecord {
  time: string;
  /** `ingress` or `admin`: which gate decided. */
  gate: string;
  requestId: string;
  principal: string;
  tenant: string;
  route: string;
  action: GateAction;
  topic?: string;
  /** `allow`, or `deny`: some filter refused. */
  decision: 'allow' | 'deny';
  /** Whether a deny was enforced (fail-closed) or only reported (report-only mode: the request proceeded). */
  enforced: boolean;
  /** The first refusing filter and its reason, for a deny. */
  filter?: string;
  reason?: string;
  remoteAddress: string;
}

/**
 * Where audit records go. `record` must not throw and must not wait on I/O: a sink queues and writes on its own,
 * and a failure to write is its to log (at ERROR); the request it concerns has already proceeded.
 */
export interface AuditSink {
  record(record: AuditRecord): void;
  /** What its writes came to (/metrics, /health); a sink that does not say is taken as writing every record. */
  stats?(): AuditSinkStats;
  close?(): Promise<void>;
}

/** What an audit sink's writes came to: `degraded` from a failed write until the next one succeeds, and why. */
export interface AuditSinkStats {
  sink: 'LOG' | 'CLOUDEVENTS';
  status: 'up' | 'degraded';
  written: number;
  /** Writes that failed (the sink threw; Kafka refused or did not acknowledge). */
  failed: number;
  /** Records shed without a write (too many waiting for Kafka). */
  dropped: number;
  /** Records handed to the writer and not settled yet. */
  pending: number;
  lastFailure?: { at: string; reason: string };
}

/** The counts behind AuditSinkStats, kept by a sink as its writes settle. */
export class AuditOutcomes {
  private written = 0;
  private failed = 0;
  private dropped = 0;
  private failing = false;
  private lastFailure?: { at: string; reason: string };

  constructor(private readonly sink: AuditSinkStats['sink']) {}

  wrote(): void {
    this.written++;
    this.failing = false;
  }

  /** A write failed (`dropped`: the record was shed unwritten). */
  lost(reason: string, dropped = false): void {
    if (dropped) this.dropped++;
    else this.failed++;
    this.failing = true;
    this.lastFailure = { at: isoNow(), reason };
  }

  stats(pending = 0): AuditSinkStats {
    const { sink, written, failed, dropped, lastFailure } = this;
    return {
      sink,
      status: this.failing ? 'degraded' : 'up',
      written,
      failed,
      dropped,
      pending,
      ...(lastFailure ? { lastFailure } : {}),
    };
  }
}

/**
 * The default sink: one structured log line per decision (logger `Audit`), written whatever EVENTMESH_LOG_LEVEL
 * says: an audit is not a diagnostic to be filtered away.
 */
export class LoggingAuditSink implements AuditSink {
  private readonly audit = createAuditLog();
  private readonly outcomes = new AuditOutcomes('LOG');

  /** A write that throws is counted and thrown on: the gate logs it at ERROR and the request proceeds. */
  record(record: AuditRecord): void {
    if (!this.audit.enabled) return;
    try {
      this.audit.write(record.time, auditRecordJson(record));
    } catch (e) {
      this.outcomes.lost((e as Error).message);
      throw e;
    }
    this.outcomes.wrote();
  }

  stats(): AuditSinkStats {
    return this.outcomes.stats();
  }

  /** Writes the audit lines still held (they are written in batches). */
  close(): Promise<void> {
    this.audit.flush();
    return Promise.resolve();
  }
}

/** Characters JSON.stringify would escape, and anything not ASCII (left to JSON.stringify, which knows the rules). */
// eslint-disable-next-line no-control-regex -- the control characters are what it looks for
const NEEDS_STRINGIFY = /["\\\u0000-\u001f\u007f-\uffff]/;

/**
 * An audit record's JSON, for the logging sink: exactly `JSON.stringify(record)` for a record whose fields are in
 * AuditRecord's order (as SecurityGate makes them). It runs once per audited request, so the common case is
 * written out field by field: one test over all the values together finds that none needs escaping (a fifth of
 * the generic `JSON.stringify`, 1.2 µs). A record with any value that might is left to JSON.stringify whole.
 */
export function auditRecordJson(r: AuditRecord): string {
  const values =
    r.time +
    r.gate +
    r.requestId +
    r.principal +
    r.tenant +
    r.route +
    r.action +
    (r.topic ?? '') +
    r.decision +
    (r.filter ?? '') +
    (r.reason ?? '') +
    r.remoteAddress;
  if (NEEDS_STRINGIFY.test(values)) return JSON.stringify(r);
  let out = `{"time":"${r.time}","gate":"${r.gate}","requestId":"${r.requestId}","principal":"${r.principal}","tenant":"${r.tenant}","route":"${r.route}","action":"${r.action}"`;
  if (r.topic !== undefined) out += `,"topic":"${r.topic}"`;
  out += `,"decision":"${r.decision}","enforced":${r.enforced}`;
  if (r.filter !== undefined) out += `,"filter":"${r.filter}"`;
  if (r.reason !== undefined) out += `,"reason":"${r.reason}"`;
  return `${out},"remoteAddress":"${r.remoteAddress}"}`;
}
