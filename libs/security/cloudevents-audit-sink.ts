import { randomUUID } from 'node:crypto';
import { TENANT_EXTENSION, type EventFrame } from '@libs/frame';
import type { EventProducer } from '@libs/kafka';
import { createLogger } from '@libs/logging';
import { AuditOutcomes, type AuditRecord, type AuditSink, type AuditSinkStats } from './audit-sink';

/** The CloudEvents type of an audit record. */
export const AUDIT_EVENT_TYPE = 'io.eventmesh.audit.decision.v1';

/** Most audit events waiting for Kafka's acknowledgement; past it a record is dropped, counted and logged. */
const MAX_PENDING = 10000;
/** At most one ERROR line per this many milliseconds for failed audit writes (the count is exact). */
const LOG_EVERY_MS = 5000;

/**
 * Publishes each audit record as a CloudEvent to the audit topic, through the runtime's own producer, so audits
 * are subscribable and replayable with its own delivery (a webhook or stream subscription to the topic). The
 * event: type `io.eventmesh.audit.decision.v1`, source `/eventmesh/<instance>/gate/<gate>`, subject the route,
 * partition key the tenant (one tenant's records stay in order), extension `eventmeshtenant` the tenant (a tenant's
 * subscription gets only its own records), data the record as JSON. Bodies, tokens and secrets are never in a
 * record.
 *
 * `record` returns at once: the write is the producer's (batched with publishes). A failed or shed write is
 * counted and logged at ERROR (rate-limited), and the request it audits has proceeded: audit does not take the
 * data path down. When more than MAX_PENDING records wait for Kafka (Kafka down under load) further records are
 * dropped and counted, so memory stays bounded.
 */
export class CloudEventsAuditSink implements AuditSink {
  private readonly log = createLogger('CloudEventsAuditSink');
  private readonly outcomes = new AuditOutcomes('CLOUDEVENTS');
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
      const reason = `more than ${MAX_PENDING} audit events wait for Kafka; record dropped`;
      this.outcomes.lost(reason, true);
      this.complain(reason, record);
      return;
    }
    this.pending++;
    const write = this.producer
      .publish(this.topic, this.frameOf(record))
      .then(() => this.outcomes.wrote())
      .catch((e: unknown) => {
        const reason = `audit event not written to ${this.topic}: ${(e as Error).message}`;
        this.outcomes.lost(reason);
        this.complain(reason, record);
      })
      .finally(() => {
        this.pending--;
        this.settled.delete(write);
      });
    this.settled.add(write);
  }

  stats(): AuditSinkStats {
    return this.outcomes.stats(this.pending);
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
      subject: record.route,
      time: record.time,
      datacontenttype: 'application/json',
      extensions: { partitionkey: record.tenant, [TENANT_EXTENSION]: record.tenant },
      data: Buffer.from(JSON.stringify(record)),
    };
  }

  private complain(message: string, record: AuditRecord): void {
    const now = Date.now();
    if (now - this.lastLogged < LOG_EVERY_MS) return;
    this.lastLogged = now;
    const { failed, dropped } = this.outcomes.stats();
    this.log.error({ topic: this.topic, requestId: record.requestId, failed, dropped }, message);
  }
}
