import type { EventMeshConfig } from '@libs/config';
import type { EventFrame } from '@libs/frame';
import type { TemporalTracing } from './temporal-tracing';
import { settleEventTrace, TraceHeaders } from './trace-context';

/** How a delivery reached its subscriber. */
export type DeliveryTransport = 'webhook' | 'stream';

/** What one delivery attempt came to (a span attribute; the dispatch loop's own outcome is decided elsewhere). */
export type DeliveryOutcome = 'delivered' | 'failed' | 'gone' | 'rejected' | 'not-attempted';

/** The span of one delivery attempt, while it is out. */
export interface DeliverySpan {
  /** The context a webhook request carries in its `traceparent` and `tracestate` headers: this span's. */
  readonly headers: TraceHeaders;
  /** Ends the span with the attempt's outcome (`status`: the sink's HTTP status; `error`: why it failed). */
  end(outcome: DeliveryOutcome, detail?: { status?: number; error?: string }): void;
}

/** The subscription a delivery is for, as a span names it. */
export interface DeliveryTarget {
  id: string;
  topic: string;
}

/**
 * The tracing of one process (docs/operations.md#tracing). Two implementations: {@link TRACING_OFF}, the
 * default, which only carries a publisher's trace context into its events and makes no span; and the
 * OpenTelemetry one (otel-tracing.ts), loaded only when EVENTMESH_TRACING_ENABLED=true.
 */
export interface Tracing {
  readonly enabled: boolean;
  /**
   * Settles each frame's trace context (trace-context.ts: an event's own `traceparent` extension wins, else the
   * request's) and runs `produce`. With tracing on, under a publish span, child of the request's `traceparent`,
   * whose context the events without their own are stamped with.
   */
  publish<T>(
    topic: string,
    frames: EventFrame[],
    request: TraceHeaders | undefined,
    produce: () => Promise<T>,
  ): Promise<T>;
  /** A delivery attempt's span, child of the event's trace context; undefined when tracing is off. */
  startDelivery(target: DeliveryTarget, frame: EventFrame, transport: DeliveryTransport): DeliverySpan | undefined;
  /** The Temporal SDK's OpenTelemetry interceptors and sinks (temporal-tracing.ts); undefined when tracing is off. */
  readonly temporal?: TemporalTracing;
  /** Exports what is pending and stops (instance shutdown). */
  shutdown(): Promise<void>;
}

/** Tracing off: the request's trace context goes into the events that have none, and nothing else happens. */
export const TRACING_OFF: Tracing = {
  enabled: false,
  publish<T>(
    _topic: string,
    frames: EventFrame[],
    request: TraceHeaders | undefined,
    produce: () => Promise<T>,
  ): Promise<T> {
    for (const frame of frames) settleEventTrace(frame, request);
    return produce();
  },
  startDelivery: () => undefined,
  shutdown: () => Promise.resolve(),
};

/**
 * The tracing a process runs with: {@link TRACING_OFF}, or OpenTelemetry when enabled (its SDK is loaded only
 * then, so an instance without tracing does not load it at all).
 */
export async function startTracing(config: EventMeshConfig): Promise<Tracing> {
  if (!config.tracing.enabled) return TRACING_OFF;
  const { OtelTracing } = await import('./otel-tracing');
  return OtelTracing.start(config.tracing, config.instance.id);
}
