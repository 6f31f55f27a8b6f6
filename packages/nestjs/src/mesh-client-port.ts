import type { CloudEvent } from 'cloudevents';
import type { MeshFilter, MeshPolicy } from './mesh-handler.decorators';

/** The stream subscription a decorated method consumes: found by `name`, created once when missing. */
export interface StreamSubscriptionSpec {
  name: string;
  topic: string;
  filters: MeshFilter[];
  policy?: MeshPolicy;
}

/** A running consumer of one subscription, as the module reports it (health) and stops it at shutdown. */
export interface MeshConsumer {
  /** `connecting`, `connected`, `reconnecting`, `draining` or `closed` (the SDK's `ConsumerState`). */
  readonly state: string;
  /** Stop taking deliveries, let the handlers in flight finish and answer them, then close. */
  drain(): Promise<void>;
}

/** Called per event: resolving acks it, throwing nacks it, throwing a `RejectError` dead-letters it. */
export type MeshEventHandler = (event: CloudEvent<unknown>, delivery: unknown) => Promise<void>;

/**
 * What the module needs from a client to run decorated handlers: the SDK's `EventMeshClient` (through
 * `sdkPort`) in an app, `InMemoryEventMeshClient` in a unit test. One seam, so the same discovery, Nest
 * context and shutdown code runs in both.
 */
export interface MeshClientPort {
  /** The id of the subscription named `spec.name`, created with `spec` when there is none. */
  ensureStreamSubscription(spec: StreamSubscriptionSpec): Promise<string>;
  consume(
    subscriptionId: string,
    handler: MeshEventHandler,
    options: { window?: number; concurrency?: number },
  ): MeshConsumer;
  /**
   * Posts `reply` as the answer to `request` (the reply gets the request's `correlationid`): true when the runtime
   * took it, false when the request is no longer pending (404 `REQUEST_NOT_PENDING`).
   */
  reply(request: CloudEvent<unknown>, reply: CloudEvent<unknown>): Promise<boolean>;
  /** Ends what the client holds (its connections), after every consumer drained. */
  close(): Promise<void>;
}

/** The injection token of the port (a symbol: the app never injects it, the module and its tests do). */
export const MESH_CLIENT_PORT = Symbol('eventmesh:client-port');
