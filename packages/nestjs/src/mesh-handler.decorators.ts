import { SetMetadata } from '@nestjs/common';

/** How a stream subscription spreads its events over the connected consumers (the runtime's `config.policy`). */
export type MeshPolicy = 'LOAD_BALANCE' | 'BROADCAST' | 'MULTICAST';

/** The CloudEvents Subscriptions API filter dialects the runtime accepts in a subscription's `filters`. */
export type MeshFilter =
  | { exact: Record<string, string> }
  | { prefix: Record<string, string> }
  | { suffix: Record<string, string> }
  | { all: MeshFilter[] }
  | { any: MeshFilter[] }
  | { not: MeshFilter }
  | { sql: string };

export interface OnMeshEventOptions {
  /** The topic the stream subscription reads. */
  topic: string;
  /** The subscription's filters, all of which must match (empty: every event of the topic). */
  filter?: MeshFilter | MeshFilter[];
  /** LOAD_BALANCE (default), BROADCAST or MULTICAST. */
  policy?: MeshPolicy;
  /**
   * The subscription's name, the key that makes bootstrap idempotent: every process of the app (and every
   * restart) consumes the one subscription of that name. Default: `<Class>.<method>`.
   */
  name?: string;
  /** Handler calls running at once in this process (default: `window`). */
  concurrency?: number;
  /** Deliveries the runtime may hand this process before it answers (the stream's `window`; default 10). */
  window?: number;
}

export interface MeshResponderOptions {
  /** The topic requests are published on (`POST /events/request?topic=`). */
  topic: string;
  filter?: OnMeshEventOptions['filter'];
  name?: string;
  concurrency?: number;
  window?: number;
  /** `type` of a reply built from a plain return value (default: the request's type + `.reply`). */
  replyType?: string;
  /** `source` of a reply built from a plain return value (default: `/nestjs/<Class>.<method>`). */
  replySource?: string;
}

/** What a decorated method registered; read back at bootstrap by the handler explorer. */
export type MeshHandlerMetadata =
  ({ kind: 'event' } & OnMeshEventOptions) | ({ kind: 'responder' } & MeshResponderOptions);

export const MESH_HANDLER_METADATA = Symbol('eventmesh:handler');

/**
 * Consume a stream subscription with this method: called once per event (arguments: the CloudEvent and the
 * delivery, or what `@MeshData()` / `@MeshCloudEvent()` select). Resolving acks the event, throwing nacks it
 * (the runtime delivers it again after its retry delay), throwing a `RejectError` dead-letters it.
 */
export const OnMeshEvent = (options: OnMeshEventOptions): MethodDecorator =>
  SetMetadata(MESH_HANDLER_METADATA, { kind: 'event', ...options } satisfies MeshHandlerMetadata);

/**
 * Answer request-reply requests published on `topic`: the method's return value (a CloudEvent, or any value that
 * becomes the reply's `data`) is posted as the reply to the request's `correlationid`, then the request is acked.
 */
export const MeshResponder = (options: MeshResponderOptions): MethodDecorator =>
  SetMetadata(MESH_HANDLER_METADATA, { kind: 'responder', ...options } satisfies MeshHandlerMetadata);
