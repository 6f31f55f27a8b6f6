import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { EventIngress } from '@libs/ingress';
import type { RuntimeMetrics } from '@libs/metrics';
import { gateHeadersOf, type Admission, type GateRequest, type SecurityGate } from '@libs/security';
import type { AdaptorRegistry } from '@libs/frame';
import { publishRequestOf } from '../http/content-mode';
import { z } from 'zod';
import { errors, GATED, RouteDoc } from '../http/api-route';
import type { GateRouteSpec } from '../http/gate-route';
import { publishAnswerSchema, publishedEventSchema } from '../http/api-schemas';
import { answerError, answerJson } from '../http/raw-answer';
import { requestIdOfRequest } from '../http/request-log';

export const PUBLISH_PATH = '/events/publish';
const ROUTE = `POST ${PUBLISH_PATH}`;

/** How the gate treats a publish (the document's `security`): the ingress gate, as a publish. */
export const PUBLISH_GATE: GateRouteSpec = { action: 'publish', topic: { query: 'topic' }, publishes: true };

/**
 * The route's entry in the API document (the gateway adds it to the route table: it is served ahead of Fastify),
 * with the runtime's most events in a batch.
 */
export function publishDoc(maxBatchEvents: number): RouteDoc {
  return {
    summary: 'Publish one event, or a batch',
    tags: ['events'],
    query: z.object({ topic: z.string().optional().describe("the topic (the runtime's default when absent)") }),
    body: {
      schema: publishedEventSchema,
      contentTypes: ['application/cloudevents+json', 'application/json'],
      contentSchemas: {
        'application/cloudevents-batch+json': z.array(publishedEventSchema).min(1).max(maxBatchEvents),
      },
      description:
        'a CloudEvent (structured JSON), a batch (`application/cloudevents-batch+json`, `GET /limits` says how large), or binary mode (any content type with `ce-*` headers, the body is the data)',
    },
    responses: {
      202: { description: 'written to Kafka: where (`results`, in order, for a batch)', schema: publishAnswerSchema },
      ...errors(400, 404, 413, 415),
      ...GATED,
    },
  };
}

export interface PublishRouteDeps {
  ingress: EventIngress;
  gate: SecurityGate;
  defaultTopic: string;
  bodyLimitBytes: number;
  /** The protocols a publish may use: the registry picks the adaptor of each request (frame-adaptors.ts). */
  adaptors: AdaptorRegistry;
  /** Hears of each publish's outcome, size and duration (libs/metrics); absent: metrics are off. */
  metrics?: Pick<RuntimeMetrics, 'published' | 'publishFailed'>;
}

/**
 * `POST /events/publish`, the runtime's hot path, served on Node's HTTP server ahead of Fastify and Nest.
 *
 * Why: a publish is one small request whose cost is the runtime's throughput. Through Nest and Fastify it cost
 * about 200 µs of CPU; the framework's share of that (routing, guard, interceptor and filter pipeline, and
 * Fastify's body parser binding an AsyncResource per request) was larger than the HTTP parsing, the CloudEvents
 * validation and the Kafka encoding together (docs/benchmarks.md has the profiles and figures). The contract is
 * the one every route has: the request gate admits the request before anything is written, errors are the same `{ code, message }`
 * bodies from the same mapping (`toHttpError`), the body limit is the gateway's, and once the gateway is
 * closing it answers 503 and closes the connection, as Fastify does for its routes. Every other route, and every
 * other method on this path, goes to Fastify.
 */
export class PublishRoute {
  private closing = false;

  constructor(private readonly deps: PublishRouteDeps) {}

  /** From now on every publish is refused with 503 `SHUTTING_DOWN` and its connection closed. */
  close(): void {
    this.closing = true;
  }

  /** Takes the request when it is a publish (true); otherwise leaves it for the router (false). */
  readonly handle = (request: IncomingMessage, response: ServerResponse): boolean => {
    if (request.method !== 'POST') return false;
    const url = request.url ?? '';
    const queryAt = url.indexOf('?');
    if ((queryAt === -1 ? url : url.slice(0, queryAt)) !== PUBLISH_PATH) return false;
    this.serve(request, response, queryAt === -1 ? '' : url.slice(queryAt + 1)).catch(() => response.destroy());
    return true;
  };

  private async serve(request: IncomingMessage, response: ServerResponse, query: string): Promise<void> {
    const metrics = this.deps.metrics;
    const started = metrics ? performance.now() : 0;
    let admission: Admission | undefined;
    let bodyRead = false;
    try {
      if (this.closing)
        throw new EventMeshError(ErrorCode.ShuttingDown, 'this gateway is shutting down; publish again', {}, true);
      const topic = topicOf(query);
      const requestId = requestIdOfRequest(request);
      const gated: GateRequest = {
        route: ROUTE,
        requestId,
        action: 'publish',
        topic: topic ?? this.deps.defaultTopic,
        headers: gateHeadersOf(request),
        remoteAddress: request.socket.remoteAddress ?? '',
      };
      // The credential is in the headers: a caller the gate does not know is refused before its body is read.
      await this.deps.gate.authenticate(gated);
      const raw = await readBody(request, this.deps.bodyLimitBytes);
      bodyRead = true;
      const publish = publishRequestOf(this.deps.adaptors, request.headers, { raw }, true);
      // The gate decides on the whole request (the signature covers the body, the quota counts its events), before
      // anything is written.
      gated.body = raw;
      gated.publish = { events: publish.adaptor.eventsIn(publish.message), bytes: raw?.length ?? 0 };
      admission = await this.deps.gate.admit(gated);
      admission.release();
      // Each event's Kafka record names the request (EventFrame.requestId): its delivery logs do.
      const results = await this.deps.ingress.publish(
        topic,
        admission.caller.tenant,
        publish,
        (frame) => (frame.requestId = requestId),
      );
      answerJson(response, 202, publish.adaptor.batch ? { results } : results[0], closing(this.closing));
      metrics?.published(results.length, raw?.length ?? 0, (performance.now() - started) / 1000);
    } catch (e) {
      // The client left (mid-body, or its connection is gone): nobody to answer, and nothing to report. A
      // request whose body was read whole is destroyed too, and is answered.
      if (request.socket.destroyed || (request.destroyed && !request.complete)) {
        metrics?.publishFailed(undefined, 0, 0);
        return;
      }
      // A body left unread (over the limit, or refused before it was read) is not read after the answer either: the
      // connection closes. Any other refused body was read whole, and the connection stays reusable.
      const { status, code } = answerError(response, e, closing(this.closing || !bodyRead));
      // Refused after the gate charged it, with nothing written: the tenant's quota gets the events back.
      if (wroteNothing(status, code)) admission?.refund();
      metrics?.publishFailed(code, status, (performance.now() - started) / 1000);
    }
  }
}

/**
 * Whether a failed publish wrote nothing, so the quota's charge goes back: every 4xx (the events were refused
 * before any was written), and the 503s that say nothing was taken (shed at the producer's cap, shutting down).
 * Not KAFKA_UNAVAILABLE: the deadline passed while Kafka may have written the events.
 */
export function wroteNothing(status: number, code: string | undefined): boolean {
  return (status >= 400 && status < 500) || code === ErrorCode.Overloaded || code === ErrorCode.ShuttingDown;
}

function topicOf(query: string): string | undefined {
  if (query === '') return undefined;
  const topics = new URLSearchParams(query).getAll('topic');
  if (topics.length > 1) {
    throw new EventMeshError(ErrorCode.InvalidRequest, 'topic: give one topic per publish', { field: 'topic' });
  }
  return topics[0] || undefined;
}

/**
 * The whole body, or undefined when there is none; a 413 as soon as it is known to exceed the limit. Rejects
 * when the client goes away first (the caller then answers nobody).
 */
function readBody(request: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  const declared = request.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(tooLarge(limit));
  if (request.destroyed && !request.complete) return Promise.reject(new Error('the client closed the connection'));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const onData = (chunk: Buffer) => {
      length += chunk.length;
      if (length > limit) {
        request.off('data', onData);
        request.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    request.on('data', onData);
    request.once('end', () =>
      resolve(length === 0 ? undefined : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, length)),
    );
    request.once('error', reject);
    request.once('close', () => {
      if (!request.complete) reject(new Error('the client closed the connection'));
    });
  });
}

const tooLarge = (limit: number) =>
  new EventMeshError(ErrorCode.PayloadTooLarge, `request body is larger than the limit of ${limit} bytes`, {
    limitBytes: limit,
  });

/** The header that closes the connection after the answer, when it must close. */
const CLOSE = { connection: 'close' };
const closing = (close: boolean): Record<string, string> | undefined => (close ? CLOSE : undefined);
