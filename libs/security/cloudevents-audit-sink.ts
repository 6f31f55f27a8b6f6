import { randomUUID } from 'node:crypto';
import type { EventFrame } from '../frame';
import type { EventProducer } from '../kafka';
import { createLogger } from '../logging';
import type { AuditRecord, AuditSink } from './audit-sink';

/** The CloudEvents type of an audit record. */
export const AUDIT_EVENT_TYPE = 'io.eventmesh.audit.decision.v1';

/** Most audit events waiting for Kafka's acknowledgement; past it a record is dropped, counted and logged. */
const MAX_PENDING = 10000;
/** At most one ERROR line per this many milliseconds for failed audit writes (the count is exact). */
const LOG_EVERY_MS = 5000;

export interface AuditSinkStats {
  published: number;
  failed: number;
  dropped: number;
  pending: number;
}

/**
 * Publishes each audit record as a CloudEvent to the audit topic, through the runtime's own producer, so audits
 * are subscribable and replayable with its own delivery (a webhook or stream subscription to the topic). The
 * event: type `io.eventmesh.audit.decision.v1`, source `/eventmesh/<instance>/gate/<gate>`, subject the route,
 * partition key the tenant (one tenant's records stay in order), data the record as JSON. Bodies, tokens and
 * secrets are never in a record.
 *
 * `record` returns at once: the write is the producer's (batched with publishes). A failed or shed write is
 * counted and logged at ERROR (rate-limited), and the request it audits has proceeded: audit does not take the
 * data path down. When more than MAX_PENDING records wait for Kafka (Kafka down under load) further records are
 * dropped and counted, so memory stays bounded.
 */
export class CloudEventsAuditSink implements AuditSink {
  private readonly log = createLogger('CloudEventsAuditSink');
  private readonly counts = { published: 0, failed: 0, dropped: 0 };
  private pending = 0;
  private lastLogged = 0;
  private readonly settled = new Set<Promise<unknown>>();

  constructor(
    private readonly producer: EventProducer,
    private readonly topic: string,
    private readonly instanceId: string,
  ) {}

  record(record: AuditRecord): void {
    if (this.pending >= MAX_PENDING) {
      this.counts.dropped++;
      this.complain(`more than ${MAX_PENDING} audit events wait for Kafka; record dropped`, record);
      return;
    }
    this.pending++;
    const write = this.producer
      .publish(this.topic, this.frameOf(record))
      .then(() => {
        this.counts.published++;
      })
      .catch((e: unknown) => {
        this.counts.failed++;
        this.complain(`audit event not written: ${(e as Error).message}`, record);
      })
      .finally(() => {
        this.pending--;
        this.settled.delete(write);
      });
    this.settled.add(write);
  }

  stats(): AuditSinkStats {
    return { ...this.counts, pending: this.pending };
  }

  /** Waits for the records already handed to the producer (shutdown, before the producer disconnects). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.settled]);
  }

  private frameOf(record: AuditRecord): EventFrame {
    return {
      id: randomUUID(),
      source: `/eventmesh/${this.instanceId}/gate/${record.gate}`,
      type: AUDIT_EVENT_TYPE,
      specversion: '1.0',
      subject: record.route,
      time: record.time,
      datacontenttype: 'application/json',
      extensions: { partitionkey: record.tenant },
      data: Buffer.from(JSON.stringify(record)),
    };
  }

  private complain(message: string, record: AuditRecord): void {
    const now = Date.now();
    if (now - this.lastLogged < LOG_EVERY_MS) return;
    this.lastLogged = now;
    this.log.error({ topic: this.topic, requestId: record.requestId, ...this.counts }, message);
  }
}
