import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { MetricSources } from './metric-sources';

/**
 * Every series the runtime exports (besides Node's defaults and the Temporal core's), in one place: name, help,
 * labels, buckets, and for the series read when scraped (gauges and the counters other components already keep),
 * where the value comes from. Labels are bounded: outcomes and codes are enums; `subscription`, `topic` and
 * `partition` name the lanes this instance dispatches, so they are bounded by its subscriptions and partitions.
 * No label carries an event, a tenant or a sink URL. docs/operations.md#metrics lists them.
 */
export function defineMetrics(register: Registry, sources: MetricSources) {
  const registers = [register];
  const latency = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
  return {
    // Publishing (the gateway's POST /events/publish).
    publishRequests: new Counter({
      name: 'eventmesh_publish_requests_total',
      help: 'Publish requests answered, by outcome: accepted, or the error code of the refusal (lower case), or client_gone.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    publishEvents: new Counter({
      name: 'eventmesh_publish_events_total',
      help: 'Events accepted (written to Kafka and acknowledged).',
      registers,
    }),
    publishBytes: new Counter({
      name: 'eventmesh_publish_bytes_total',
      help: 'Request body bytes of accepted publishes.',
      registers,
    }),
    publishDuration: new Histogram({
      name: 'eventmesh_publish_duration_seconds',
      help: 'Publish request duration, from the request to its answer; result: accepted, refused (4xx) or failed (5xx).',
      labelNames: ['result'] as const,
      buckets: latency,
      registers,
    }),
    publishBatchEvents: new Histogram({
      name: 'eventmesh_publish_batch_events',
      help: 'Events per accepted publish request (1 in the binary and structured modes).',
      buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000],
      registers,
    }),
    // The Kafka producer (libs/kafka/event-producer.ts).
    produceDuration: new Histogram({
      name: 'eventmesh_kafka_produce_duration_seconds',
      help: 'Kafka produce requests, from send to the acknowledgement from all in-sync replicas (acked) or the failure (failed).',
      labelNames: ['result'] as const,
      buckets: latency,
      registers,
    }),
    produceBatchEvents: new Histogram({
      name: 'eventmesh_kafka_produce_batch_events',
      help: 'Events per Kafka produce request (publishes coalesced by the producer).',
      buckets: [1, 5, 10, 25, 50, 100, 250, 500, 1000, 5000],
      registers,
    }),
    produceBytes: new Counter({
      name: 'eventmesh_kafka_produce_bytes_total',
      help: 'Record bytes (keys, values, headers) sent in produce requests.',
      registers,
    }),
    producerHeldEvents: new Gauge({
      name: 'eventmesh_kafka_producer_held_events',
      help: 'Events the producer holds (queued, or in a produce request not yet finished); publishes past EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_EVENTS are shed.',
      registers,
      collect() {
        const depth = sources.producer?.();
        if (depth) this.set(depth.events);
      },
    }),
    producerHeldBytes: new Gauge({
      name: 'eventmesh_kafka_producer_held_bytes',
      help: 'Bytes the producer holds (queued or in flight).',
      registers,
      collect() {
        const depth = sources.producer?.();
        if (depth) this.set(depth.bytes);
      },
    }),
    producerQueuedEvents: new Gauge({
      name: 'eventmesh_kafka_producer_queued_events',
      help: 'Events waiting for a produce request.',
      registers,
      collect() {
        const depth = sources.producer?.();
        if (depth) this.set(depth.queuedEvents);
      },
    }),
    producerInFlight: new Gauge({
      name: 'eventmesh_kafka_producer_in_flight_requests',
      help: 'Produce requests awaiting their acknowledgement.',
      registers,
      collect() {
        const depth = sources.producer?.();
        if (depth) this.set(depth.inFlightRequests);
      },
    }),
    producerShed: new Counter({
      name: 'eventmesh_kafka_producer_shed_total',
      help: 'Publishes refused at once because the producer held its most (503 OVERLOADED, limit producerQueue).',
      registers,
      collect() {
        const depth = sources.producer?.();
        if (depth) setCounter(this, depth.shed);
      },
    }),
    producerTimedOut: new Counter({
      name: 'eventmesh_kafka_producer_timed_out_total',
      help: 'Publishes answered 503 KAFKA_UNAVAILABLE because Kafka did not acknowledge them within EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS.',
      registers,
      collect() {
        const depth = sources.producer?.();
        if (depth) setCounter(this, depth.timedOut);
      },
    }),
    // Delivery (libs/delivery: the failure policy and the running loops).
    deliveryAttempts: new Counter({
      name: 'eventmesh_delivery_attempts_total',
      help: 'Delivery attempts by transport (webhook, stream) and outcome: delivered, failed, rejected (the receiver refused it for good), gone (410), not_attempted (no stream client).',
      labelNames: ['transport', 'outcome'] as const,
      registers,
    }),
    publishToAck: new Histogram({
      name: 'eventmesh_delivery_publish_to_ack_seconds',
      help: "From the event's Kafka record time to its sink's acknowledgement, for deliveries acknowledged in their lane (parked deliveries are not timed).",
      labelNames: ['transport'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    }),
    deliveryParked: new Counter({
      name: 'eventmesh_delivery_parked_total',
      help: 'Failing deliveries moved to the retry table.',
      registers,
    }),
    deliveryDeadLettered: new Counter({
      name: 'eventmesh_delivery_dead_lettered_total',
      help: 'Deliveries moved to the dead-letter queue (attempts exhausted, rejected, or not a CloudEvent).',
      registers,
    }),
    breakerOpenings: new Counter({
      name: 'eventmesh_delivery_circuit_openings_total',
      help: "Times a subscription's circuit breaker opened (from closed, or again after a failed probe).",
      registers,
    }),
    lag: new Gauge({
      name: 'eventmesh_delivery_lag_events',
      help: 'Events in Kafka a subscription has not settled yet, per partition, for the lanes this instance dispatches now.',
      labelNames: ['subscription', 'topic', 'partition'] as const,
      registers,
      collect() {
        this.reset();
        for (const loop of sources.loops?.values() ?? []) {
          for (const l of loop.laneLags())
            this.set({ subscription: l.subscriptionId, topic: l.topic, partition: String(l.partition) }, l.lag);
        }
      },
    }),
    circuitState: new Gauge({
      name: 'eventmesh_delivery_circuit_state',
      help: "The circuit breaker of each subscription's sink this instance dispatches: 0 closed, 1 half-open, 2 open.",
      labelNames: ['subscription'] as const,
      registers,
      collect() {
        this.reset();
        for (const loop of sources.loops?.values() ?? []) {
          for (const b of loop.breakerStates())
            this.set({ subscription: b.subscriptionId }, b.state === 'OPEN' ? 2 : b.state === 'HALF_OPEN' ? 1 : 0);
        }
      },
    }),
    loops: new Gauge({
      name: 'eventmesh_dispatch_loops',
      help: 'Dispatch loops running in this instance (LOCAL_STICKY_PULL: its dispatch loop; PARTITION_OWNED_PULL: one per partition it owns).',
      registers,
      collect() {
        if (sources.loops) this.set(sources.loops.values().length);
      },
    }),
    lastRoundAge: new Gauge({
      name: 'eventmesh_dispatch_last_round_age_seconds',
      help: 'Seconds since the least recent running dispatch loop completed a round (readiness fails past EVENTMESH_HEALTH_DISPATCH_STALE_MS).',
      registers,
      collect() {
        const rounds = sources.loops?.values().map((l) => l.lastRoundAt) ?? [];
        this.reset();
        if (rounds.length > 0) this.set((Date.now() - Math.min(...rounds)) / 1000);
      },
    }),
    parkedRows: new Gauge({
      name: 'eventmesh_delivery_retry_parked',
      help: 'Deliveries parked in the retry table, runtime-wide (read from Postgres, at most every 10 s).',
      registers,
      async collect() {
        const counts = await sources.storedCounts?.();
        if (counts) this.set(counts.parked);
      },
    }),
    deadLetters: new Gauge({
      name: 'eventmesh_delivery_dead_letters',
      help: 'Dead letters kept, runtime-wide (read from Postgres, at most every 10 s).',
      registers,
      async collect() {
        const counts = await sources.storedCounts?.();
        if (counts) this.set(counts.deadLetters);
      },
    }),
    pushDeadLetters: new Gauge({
      name: 'eventmesh_a2a_push_dead_letters',
      help: 'A2A push notifications given up and not resolved since (dead push letters), runtime-wide (read from Postgres, at most every 10 s).',
      registers,
      async collect() {
        const counts = await sources.storedCounts?.();
        if (counts) this.set(counts.pushDeadLetters);
      },
    }),
    // Ownership (epoch fences, PARTITION_OWNED_PULL leases, LOCAL_STICKY_PULL orphan takeover).
    partitionEpoch: new Gauge({
      name: 'eventmesh_ownership_partition_epoch',
      help: "PARTITION_OWNED_PULL: each partition's lease epoch (it grows by one at every claim: a change is a takeover); owned: whether an owner holds it.",
      labelNames: ['topic', 'partition', 'owned'] as const,
      registers,
      async collect() {
        const counts = await sources.storedCounts?.();
        if (!counts) return;
        this.reset();
        for (const p of counts.partitions)
          this.set({ topic: p.topic, partition: String(p.partition), owned: String(p.owned) }, p.epoch);
      },
    }),
    rejectedWrites: new Counter({
      name: 'eventmesh_ownership_rejected_writes_total',
      help: 'Writes refused for a stale epoch (a fenced-off former owner), runtime-wide, by epoch table: partition_leases or dispatch_runs.',
      labelNames: ['table'] as const,
      registers,
      async collect() {
        const counts = await sources.storedCounts?.();
        if (!counts) return;
        setCounter(this, counts.rejectedWrites.partitionLeases, { table: 'partition_leases' });
        setCounter(this, counts.rejectedWrites.dispatchRuns, { table: 'dispatch_runs' }, false);
      },
    }),
    postgresPoolLeaks: new Counter({
      name: 'eventmesh_postgres_pool_leaks_total',
      help: "Postgres connections held out of the pool past EVENTMESH_POSTGRES_LEAK_DETECTION_THRESHOLD_MS (each logged with its acquirer's stack); 0 while leak detection is off.",
      registers,
      collect() {
        const pool = sources.postgresPool?.();
        if (pool) setCounter(this, pool.leaks);
      },
    }),
    ownedPartitions: new Gauge({
      name: 'eventmesh_ownership_owned_partitions',
      help: 'PARTITION_OWNED_PULL: partitions this instance runs a loop for now.',
      registers,
      collect() {
        if (sources.loops) this.set(sources.loops.values().filter((l) => l.scope !== undefined).length);
      },
    }),
    membershipConfirmed: new Gauge({
      name: 'eventmesh_ownership_membership_confirmed',
      help: "PARTITION_OWNED_PULL: 1 while Temporal confirmed this instance's membership within half a lease TTL (its partition loops may work).",
      registers,
      collect() {
        const agent = sources.ownership?.();
        if (agent) this.set(agent.confirmed ? 1 : 0);
      },
    }),
    membershipJoins: new Counter({
      name: 'eventmesh_ownership_joins_total',
      help: 'PARTITION_OWNED_PULL: times this instance joined the partition owners (a rejoin follows a lost lease).',
      registers,
      collect() {
        const agent = sources.ownership?.();
        if (agent) setCounter(this, agent.joins);
      },
    }),
    orphans: new Gauge({
      name: 'eventmesh_ownership_orphaned_subscriptions',
      help: "LOCAL_STICKY_PULL: orphaned subscriptions (their instance's dispatch run unrenewed past the grace) seen in the last round.",
      registers,
      collect() {
        const orphans = sources.orphans?.();
        if (orphans) this.set(orphans.orphans);
      },
    }),
    orphansTaken: new Counter({
      name: 'eventmesh_ownership_takeovers_total',
      help: 'LOCAL_STICKY_PULL: orphaned subscriptions this instance took over.',
      registers,
      collect() {
        const orphans = sources.orphans?.();
        if (orphans) setCounter(this, orphans.taken);
      },
    }),
    // The request gates (libs/security).
    gateDecisions: new Counter({
      name: 'eventmesh_gate_decisions_total',
      help: 'Decisions of the request gate (gate=ingress) and the admin gate (gate=admin): allow, or deny with the filter and reason (filter=quota: quota throttles). Report-only gates count denials they did not enforce.',
      labelNames: ['gate', 'decision', 'filter', 'reason'] as const,
      registers,
      collect() {
        const gates = sources.gates?.();
        if (!gates) return;
        this.reset();
        for (const [gate, stats] of Object.entries(gates)) {
          this.inc({ gate, decision: 'allow', filter: '', reason: '' }, stats.allowed);
          for (const [key, n] of Object.entries(stats.denied)) {
            const at = key.indexOf(':');
            this.inc({ gate, decision: 'deny', filter: key.slice(0, at), reason: key.slice(at + 1) }, n);
          }
        }
      },
    }),
    gateErrors: new Counter({
      name: 'eventmesh_gate_filter_errors_total',
      help: "Gate filters that could not decide (failed closed or skipped, as the gate's fail-closed setting says).",
      labelNames: ['gate', 'filter'] as const,
      registers,
      collect() {
        const gates = sources.gates?.();
        if (!gates) return;
        this.reset();
        for (const [gate, stats] of Object.entries(gates))
          for (const [filter, n] of Object.entries(stats.errors)) this.inc({ gate, filter }, n);
      },
    }),
    auditRecords: new Counter({
      name: 'eventmesh_audit_records_total',
      help: 'Audit records by what became of them: written, failed (the sink threw, or Kafka refused or did not acknowledge), dropped (too many waiting for Kafka).',
      labelNames: ['sink', 'outcome'] as const,
      registers,
      collect() {
        const audit = auditOf(sources);
        if (!audit) return;
        this.reset();
        for (const outcome of ['written', 'failed', 'dropped'] as const)
          this.inc({ sink: audit.sink, outcome }, audit[outcome]);
      },
    }),
    auditDegraded: new Gauge({
      name: 'eventmesh_audit_degraded',
      help: "1 while the audit sink's last write failed (records are being lost; /health says why), 0 once a write succeeds again.",
      registers,
      collect() {
        const audit = auditOf(sources);
        if (audit) this.set(audit.status === 'degraded' ? 1 : 0);
      },
    }),
    // Request-reply (POST /events/request).
    requestReplyPending: new Gauge({
      name: 'eventmesh_request_reply_pending',
      help: 'Request-replies this gateway process holds waiting for their reply.',
      registers,
      collect() {
        const stats = sources.requestReply?.();
        if (stats) this.set(stats.pending);
      },
    }),
    requestReplyOutcomes: new Counter({
      name: 'eventmesh_request_reply_total',
      help: 'Request-replies by outcome: replied, timed_out, refused (at EVENTMESH_HTTP_MAX_PENDING_REQUESTS), refused_tenant (at EVENTMESH_HTTP_MAX_PENDING_REQUESTS_PER_TENANT).',
      labelNames: ['outcome'] as const,
      registers,
      collect() {
        const stats = sources.requestReply?.();
        if (!stats) return;
        setCounter(this, stats.replied, { outcome: 'replied' });
        setCounter(this, stats.timedOut, { outcome: 'timed_out' }, false);
        setCounter(this, stats.refused, { outcome: 'refused' }, false);
        setCounter(this, stats.refusedForTenant ?? 0, { outcome: 'refused_tenant' }, false);
      },
    }),
    lateReplies: new Counter({
      name: 'eventmesh_request_reply_late_replies_total',
      help: 'Replies that came after their request was answered (timed out) or its requester left.',
      registers,
      collect() {
        const stats = sources.requestReply?.();
        if (stats) setCounter(this, stats.lateReplies);
      },
    }),
    // The metrics themselves.
    // Streaming sessions (libs/sessions, docs/streaming-sessions.md#operations).
    sessionsOpened: new Counter({
      name: 'eventmesh_sessions_opened_total',
      help: "Streaming session opens by this process's clients, by outcome: opened, or the error code of the refusal (lower case).",
      labelNames: ['outcome'] as const,
      registers,
    }),
    sessionChunks: new Counter({
      name: 'eventmesh_session_chunks_total',
      help: 'Chunks agents sent into sessions, counted on the process holding the agent replica.',
      registers,
    }),
    sessionChunkBytes: new Counter({
      name: 'eventmesh_session_chunk_bytes_total',
      help: 'Bytes of those chunks.',
      registers,
    }),
    sessionStalls: new Counter({
      name: 'eventmesh_session_credit_stalls_total',
      help: "Times a session's credit fell below one largest chunk: its agent may have waited for its reader.",
      registers,
    }),
    sessionErrors: new Counter({
      name: 'eventmesh_session_errors_total',
      help: 'Sessions and calls ended by an error, by code (lower case): agent_gone, agent_error, flow_control_violation, slow_subscriber, session_ended.',
      labelNames: ['code'] as const,
      registers,
    }),
    sessionsOpen: new Gauge({
      name: 'eventmesh_sessions_open',
      help: "Streaming sessions open by this process's clients (as callers) now.",
      registers,
      collect() {
        const s = sources.sessions?.();
        if (s) this.set(s.callers);
      },
    }),
    sessionReplicas: new Gauge({
      name: 'eventmesh_session_agent_replicas',
      help: 'Session agent replicas connected to this process now.',
      registers,
      collect() {
        const s = sources.sessions?.();
        if (s) this.set(s.replicas);
      },
    }),
    scrapeErrors: new Counter({
      name: 'eventmesh_metrics_source_errors_total',
      help: "Reads of a source that failed: postgres (the stored counts, which keep their last values) or temporal (the Temporal core's exporter, whose series are left out of that scrape).",
      labelNames: ['source'] as const,
      registers,
    }),
  };
}

export type EventMeshMetricSet = ReturnType<typeof defineMetrics>;

/**
 * A counter read from a total another component keeps: prom-client counters only go up, so it is reset and set
 * (once per scrape). `reset`: false for the second and later label sets of the same counter.
 */
/** The audit sink's stats (both gates share the sink: either one's). */
function auditOf(sources: MetricSources) {
  const gates = sources.gates?.();
  return gates?.ingress.audit ?? gates?.admin.audit;
}

function setCounter<L extends string>(
  counter: Counter<L>,
  total: number,
  labels?: Partial<Record<L, string>>,
  reset = true,
): void {
  if (reset) counter.reset();
  if (labels) counter.inc(labels, total);
  else counter.inc(total);
}
