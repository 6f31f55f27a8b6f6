import {
  Attributes,
  context,
  Context,
  Link,
  propagation,
  ROOT_CONTEXT,
  Span,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  Tracer,
} from '@opentelemetry/api';
import { TraceState, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  NoopSpanProcessor,
  ParentBasedSampler,
  AlwaysOffSampler,
  AlwaysOnSampler,
  Sampler,
  SamplingDecision,
  SpanProcessor,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import type { EventMeshConfig } from '@libs/config';
import type { EventFrame } from '@libs/frame';
import { createLogger } from '@libs/logging';
import { AsyncLocalStorageContextManager } from './context-manager';
import { PooledIdGenerator } from './span-ids';
import { TemporalTracing, temporalTracingOf } from './temporal-tracing';
import { eventTraceOf, formatTraceparent, parseTraceparent, settleEventTrace, TraceHeaders } from './trace-context';
import type { DeliveryOutcome, DeliverySpan, DeliveryTarget, DeliveryTransport, Tracing } from './tracing';

/** The instrumentation scope of the runtime's own spans. */
const SCOPE = 'eventmesh';

let globalsInstalled = false;

/**
 * The process-wide OpenTelemetry API state the Temporal SDK's interceptors rely on: a context manager (the
 * active span follows async calls) and the W3C propagator (how they write a span's context into Temporal
 * headers). Installed once per process, as the Temporal runtime is; the runtime's own spans name their parents
 * explicitly and need neither.
 */
function installGlobals(): void {
  if (globalsInstalled) return;
  globalsInstalled = true;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
}

/**
 * Tracing on: OpenTelemetry spans, sampled parent-based (a caller's sampled flag is followed; a new trace is
 * sampled at EVENTMESH_TRACING_SAMPLE_RATIO), exported in batches over OTLP/HTTP when an endpoint is configured.
 * Without one, the publish and delivery spans are not recorded (nothing would receive them): each is only a context,
 * its own span id and the sampler's decision, which the events and webhooks carry on, so the spans of processes
 * that do export continue the trace. Spans carry names and ids, never event data.
 */
export class OtelTracing implements Tracing {
  readonly enabled = true;
  private readonly log = createLogger('Tracing');
  readonly temporal: TemporalTracing;

  private constructor(
    private readonly provider: BasicTracerProvider,
    readonly tracer: Tracer,
    /** Where finished spans go: the OTLP batch exporter, or nowhere. The Temporal workflow span sink uses it too. */
    readonly spanProcessor: SpanProcessor,
    readonly resource: Resource,
    private readonly sampler: Sampler,
    /** Spans are exported: record them. Else the runtime's own spans are contexts only ({@link spanFor}). */
    private readonly recording: boolean,
    /** The provider's id generator, which the spans not recorded draw from too. */
    private readonly ids: PooledIdGenerator,
  ) {
    this.temporal = temporalTracingOf(this);
  }

  /** A span of the runtime's own: recorded when spans are exported, else a context that records nothing. */
  private spanFor(name: string, kind: SpanKind, parent: Context, attributes: () => Attributes): Span {
    if (this.recording) return this.tracer.startSpan(name, { kind, attributes: attributes() }, parent);
    const parentContext = trace.getSpanContext(parent);
    const traceId = parentContext?.traceId ?? this.ids.generateTraceId();
    const sampled =
      this.sampler.shouldSample(parent, traceId, name, kind, {}, []).decision === SamplingDecision.RECORD_AND_SAMPLED;
    return trace.wrapSpanContext({
      traceId,
      spanId: this.ids.generateSpanId(),
      traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
      ...(parentContext?.traceState ? { traceState: parentContext.traceState } : {}),
    });
  }

  static start(config: EventMeshConfig['tracing'], instanceId: string): OtelTracing {
    installGlobals();
    const resource = new Resource({ 'service.name': config.serviceName, 'service.instance.id': instanceId });
    // Always one processor given: with none, the SDK would pick an exporter from OTEL_* variables itself, and
    // configuration is read in one place (libs/config).
    const spanProcessor: SpanProcessor =
      config.otlpEndpoint === ''
        ? new NoopSpanProcessor()
        : new BatchSpanProcessor(new OTLPTraceExporter({ url: `${config.otlpEndpoint}/v1/traces` }));
    // A ratio of 1 (or 0) decides without reading the trace id: the same decision as the ratio sampler's, for less.
    const root =
      config.sampleRatio >= 1
        ? new AlwaysOnSampler()
        : config.sampleRatio <= 0
          ? new AlwaysOffSampler()
          : new TraceIdRatioBasedSampler(config.sampleRatio);
    const sampler = new ParentBasedSampler({ root });
    const ids = new PooledIdGenerator();
    const provider = new BasicTracerProvider({ resource, sampler, spanProcessors: [spanProcessor], idGenerator: ids });
    const tracing = new OtelTracing(
      provider,
      provider.getTracer(SCOPE),
      spanProcessor,
      resource,
      sampler,
      config.otlpEndpoint !== '',
      ids,
    );
    tracing.log.info(
      {
        otlpEndpoint: config.otlpEndpoint || undefined,
        exported: config.otlpEndpoint !== '',
        sampleRatio: config.sampleRatio,
        serviceName: config.serviceName,
      },
      config.otlpEndpoint === ''
        ? 'tracing on; spans are not exported (no EVENTMESH_TRACING_OTLP_ENDPOINT)'
        : 'tracing on; spans exported over OTLP/HTTP',
    );
    return tracing;
  }

  async publish<T>(
    topic: string,
    frames: EventFrame[],
    request: TraceHeaders | undefined,
    produce: () => Promise<T>,
  ): Promise<T> {
    // The request's context is the parent; a request without one that carries one event with its own context
    // (a binary-mode ce-traceparent, a structured event's traceparent) continues that one.
    const incoming = request ?? (frames.length === 1 ? eventTraceOf(frames[0]) : undefined);
    const single = frames.length === 1 ? frames[0] : undefined;
    const span = this.spanFor(`publish ${topic}`, SpanKind.PRODUCER, contextOf(incoming), () => ({
      'messaging.system': 'kafka',
      'messaging.operation.type': 'send',
      'messaging.destination.name': topic,
      'messaging.batch.message_count': frames.length,
      ...(single ? { 'cloudevents.event_id': single.id, 'cloudevents.event_type': single.type } : {}),
    }));
    const own = headersOf(span);
    const links: Link[] = [];
    for (const frame of frames) {
      const kept = settleEventTrace(frame, own);
      // An event that keeps its own creation context is linked, so the publish that carried it can be found from
      // it; unless that context is the span's parent already (one event, no request context). A span not recorded
      // keeps no links.
      if (kept && this.recording && (request !== undefined || frames.length > 1)) {
        const creation = spanContextOf(eventTraceOf(frame));
        if (creation) links.push({ context: creation });
      }
    }
    if (links.length > 0) span.addLinks(links);
    try {
      const result = await produce();
      span.setStatus({ code: SpanStatusCode.OK });
      return result;
    } catch (e) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
      throw e;
    } finally {
      span.end();
    }
  }

  startDelivery(target: DeliveryTarget, frame: EventFrame, transport: DeliveryTransport): DeliverySpan {
    const span = this.spanFor(`deliver ${target.topic}`, SpanKind.CLIENT, contextOf(eventTraceOf(frame)), () => ({
      'messaging.system': 'eventmesh',
      'messaging.operation.type': 'process',
      'messaging.destination.name': target.topic,
      'eventmesh.subscription.id': target.id,
      'eventmesh.delivery.transport': transport,
      'cloudevents.event_id': frame.id,
      'cloudevents.event_type': frame.type,
    }));
    return {
      headers: headersOf(span),
      end(outcome: DeliveryOutcome, detail?: { status?: number; error?: string }) {
        span.setAttribute('eventmesh.delivery.outcome', outcome);
        if (detail?.status !== undefined) span.setAttribute('http.response.status_code', detail.status);
        if (outcome === 'delivered') span.setStatus({ code: SpanStatusCode.OK });
        else span.setStatus({ code: SpanStatusCode.ERROR, message: detail?.error ?? outcome });
        span.end();
      },
    };
  }

  async shutdown(): Promise<void> {
    try {
      await this.provider.shutdown();
    } catch (e) {
      this.log.warn(
        { error: e instanceof Error ? e.message : String(e) },
        'pending spans could not be exported at shutdown',
      );
    }
  }
}

/** A remote parent from a trace context (ROOT when there is none: the span starts a trace). */
function contextOf(headers: TraceHeaders | undefined): Context {
  const parent = spanContextOf(headers);
  return parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
}

function spanContextOf(headers: TraceHeaders | undefined) {
  const parsed = headers && parseTraceparent(headers.traceparent);
  if (!parsed) return undefined;
  return {
    traceId: parsed.traceId,
    spanId: parsed.spanId,
    traceFlags: parsed.flags & TraceFlags.SAMPLED,
    isRemote: true,
    ...(headers.tracestate !== undefined ? { traceState: new TraceState(headers.tracestate) } : {}),
  };
}

/** A span's own context as `traceparent` and `tracestate` (the parent's tracestate, which the span inherits). */
function headersOf(span: Span): TraceHeaders {
  const { traceId, spanId, traceFlags, traceState } = span.spanContext();
  const traceparent = formatTraceparent(traceId, spanId, traceFlags);
  const tracestate = traceState?.serialize();
  return tracestate ? { traceparent, tracestate } : { traceparent };
}
