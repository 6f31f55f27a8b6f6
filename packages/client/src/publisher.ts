import { ValidationError } from './errors';
import { FlowControl } from './flow-control';
import type { HttpClient } from './http';
import type { BatchPublishAnswer, PublishResult } from './api-types';
import type { PublishOptions } from './options';

/** Per-call options of `publish` and `publishMany`. */
export interface PublishCallOptions {
  /** The topic (default: the client's `topic`, else the runtime's first). */
  topic?: string;
  /** A W3C `traceparent` (and `tracestate`) put into every event of the call that has no `traceparent` of its own. */
  traceparent?: string;
  tracestate?: string;
}

export const PUBLISH_DEFAULTS: Required<PublishOptions> = {
  maxEventsInFlight: 1000,
  maxBytesInFlight: 16 * 1024 * 1024,
  lingerMs: 0,
  maxBatchEvents: 500,
  maxBatchBytes: 512 * 1024,
};

interface Pending {
  json: string;
  bytes: number;
  resolve: (r: PublishResult) => void;
  reject: (e: unknown) => void;
}

interface Lane {
  call: PublishCallOptions;
  items: Pending[];
  bytes: number;
  timer?: NodeJS.Timeout | NodeJS.Immediate;
}

/**
 * Automatic batching: publishes of one topic (and trace context) that come within `lingerMs` of each other share
 * one HTTP request, cut at `maxBatchEvents` and `maxBatchBytes`. One event goes in the structured mode, more in
 * the batch mode; each caller gets its own event's result. The runtime's batch is all or nothing, so a retry
 * resends the whole request with the same ids. A 400 naming one event's `index` fails that event only: the others
 * are sent again without it.
 */
export class Publisher {
  private readonly options: Required<PublishOptions>;
  private readonly flow: FlowControl;
  private readonly lanes = new Map<string, Lane>();

  constructor(
    private readonly http: HttpClient,
    options: PublishOptions = {},
    private readonly defaultTopic?: string,
  ) {
    this.options = { ...PUBLISH_DEFAULTS, ...options };
    this.flow = new FlowControl(this.options.maxEventsInFlight, this.options.maxBytesInFlight);
  }

  /** Events and bytes published and not yet answered. */
  get inFlight(): { events: number; bytes: number } {
    return this.flow.inFlight;
  }

  /** Waits for room in flight, then queues the event (JSON text) for the next request of its lane. */
  async publish(json: string, call: PublishCallOptions = {}): Promise<PublishResult> {
    const bytes = Buffer.byteLength(json);
    await this.flow.acquire(1, bytes);
    try {
      return await new Promise<PublishResult>((resolve, reject) =>
        this.enqueue({ json, bytes, resolve, reject }, call),
      );
    } finally {
      this.flow.release(1, bytes);
    }
  }

  private enqueue(item: Pending, call: PublishCallOptions): void {
    const topic = call.topic ?? this.defaultTopic;
    const key = `${topic ?? ''}\n${call.traceparent ?? ''}\n${call.tracestate ?? ''}`;
    let lane = this.lanes.get(key);
    if (lane && lane.bytes + item.bytes + 1 > this.options.maxBatchBytes) {
      this.flush(key, lane);
      lane = undefined;
    }
    if (!lane) this.lanes.set(key, (lane = { call: { ...call, topic }, items: [], bytes: 1 }));
    lane.items.push(item);
    lane.bytes += item.bytes + 1;
    if (lane.items.length >= this.options.maxBatchEvents) this.flush(key, lane);
    else if (!lane.timer) {
      const open = lane;
      lane.timer =
        this.options.lingerMs > 0
          ? setTimeout(() => this.flush(key, open), this.options.lingerMs)
          : setImmediate(() => this.flush(key, open));
    }
  }

  private flush(key: string, lane: Lane): void {
    if (lane.timer) {
      clearTimeout(lane.timer as NodeJS.Timeout);
      clearImmediate(lane.timer as NodeJS.Immediate);
    }
    this.lanes.delete(key);
    if (lane.items.length > 0) void this.send(lane.items, lane.call);
  }

  private async send(items: Pending[], call: PublishCallOptions): Promise<void> {
    try {
      const results = await this.post(items, call);
      items.forEach((item, i) => item.resolve(results[i]));
    } catch (e) {
      const index = e instanceof ValidationError ? e.body.index : undefined;
      if (items.length > 1 && typeof index === 'number' && index >= 0 && index < items.length) {
        items[index].reject(e);
        return this.send(
          items.filter((_, i) => i !== index),
          call,
        );
      }
      for (const item of items) item.reject(e);
    }
  }

  private async post(items: Pending[], call: PublishCallOptions): Promise<PublishResult[]> {
    const batch = items.length > 1;
    const headers: Record<string, string> = {
      'content-type': batch ? 'application/cloudevents-batch+json' : 'application/cloudevents+json',
    };
    Object.assign(headers, traceHeaders(call));
    const answer = await this.http.send({
      method: 'POST',
      path: '/events/publish',
      query: { topic: call.topic },
      headers,
      body: batch ? `[${items.map((i) => i.json).join(',')}]` : items[0].json,
      idempotent: true,
    });
    const body = JSON.parse(answer.text) as PublishResult | BatchPublishAnswer;
    return 'results' in body ? body.results : [body];
  }
}

/** The W3C trace context headers of a call: the runtime puts them into each event without a `traceparent` of its own. */
export function traceHeaders(call: PublishCallOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  if (call.traceparent) headers.traceparent = call.traceparent;
  if (call.tracestate) headers.tracestate = call.tracestate;
  return headers;
}
