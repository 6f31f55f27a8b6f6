import { createAuditLog } from '../logging';
import type { Action } from './caller';

/** One gate decision, as audited. Never a body, a token or a secret. */
export interface AuditRecord {
  time: string;
  /** `ingress` or `admin`: which gate decided. */
  gate: string;
  requestId: string;
  principal: string;
  tenant: string;
  route: string;
  action: Action;
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
  close?(): Promise<void>;
}

/**
 * The default sink: one structured log line per decision (logger `Audit`), written whatever EVENTMESH_LOG_LEVEL
 * says: an audit is not a diagnostic to be filtered away.
 */
export class LoggingAuditSink implements AuditSink {
  private readonly audit = createAuditLog();

  record(record: AuditRecord): void {
    this.audit.write(record);
  }

  /** Writes the audit lines still held (they are written in batches). */
  close(): Promise<void> {
    this.audit.flush();
    return Promise.resolve();
  }
}
