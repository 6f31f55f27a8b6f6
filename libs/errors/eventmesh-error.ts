/**
 * The one base error of the runtime. `code` is stable and machine-readable; the gateway maps it to an HTTP
 * status and a JSON body `{ code, message, ...details }` in one place (`toHttpError`, apps/gateway/src/http/http-error.ts).
 */
export enum ErrorCode {
  InvalidCloudEvent = 'INVALID_CLOUDEVENT',
  MalformedJson = 'MALFORMED_JSON',
  UnsupportedMediaType = 'UNSUPPORTED_MEDIA_TYPE',
  PayloadTooLarge = 'PAYLOAD_TOO_LARGE',
  UnknownTopic = 'UNKNOWN_TOPIC',
  InvalidRequest = 'INVALID_REQUEST',
  WebhookValidationFailed = 'WEBHOOK_VALIDATION_FAILED',
  /** A webhook sink whose host resolves to an address sinks may not reach (SSRF guard, docs/security.md). */
  SinkNotAllowed = 'SINK_NOT_ALLOWED',
  SubscriptionNotFound = 'SUBSCRIPTION_NOT_FOUND',
  /** A create under a name the tenant's other subscription has, or an ensure whose topic or protocol differs from it. */
  SubscriptionNameTaken = 'SUBSCRIPTION_NAME_TAKEN',
  /** A seek to an offset outside the partition's log (before its first stored offset or past its end), or to a partition the topic has not. */
  OffsetOutOfRange = 'OFFSET_OUT_OF_RANGE',
  /** A pause or resume of a subscription its sink disabled (410 Gone): it is not delivered either way. */
  SubscriptionDisabled = 'SUBSCRIPTION_DISABLED',
  /** A stream client of a subscription that is not ACTIVE (paused, disabled): its state refuses it, not the request. */
  SubscriptionNotActive = 'SUBSCRIPTION_NOT_ACTIVE',
  /** A dead letter (or some of the ones a replay names) the subscription has not. */
  DeadLetterNotFound = 'DEAD_LETTER_NOT_FOUND',
  /** A dead-letter replay the subscription has not. */
  ReplayNotFound = 'REPLAY_NOT_FOUND',
  /** A destructive request (a dead-letter purge) without its explicit confirmation. */
  ConfirmationRequired = 'CONFIRMATION_REQUIRED',
  /** An A2A agent card that fails validation (libs/a2a/agents/agent-card.ts). */
  InvalidAgentCard = 'INVALID_AGENT_CARD',
  AgentNotFound = 'AGENT_NOT_FOUND',
  /** A redelivery of an A2A push dead letter already resolved (redelivered, or superseded by a later push). */
  DeadLetterResolved = 'DEAD_LETTER_RESOLVED',
  /** A redelivery of an A2A push dead letter whose push config was removed (by the client, or a 410 Gone). */
  PushConfigGone = 'PUSH_CONFIG_GONE',
  /** A redelivery of an A2A push dead letter its receiver did not acknowledge (it stays dead). */
  PushNotDelivered = 'PUSH_NOT_DELIVERED',
  TaskNotFound = 'TASK_NOT_FOUND',
  IllegalTransition = 'ILLEGAL_TRANSITION',
  StaleRegistration = 'STALE_REGISTRATION',
  RequestTimeout = 'REQUEST_TIMEOUT',
  RequestNotPending = 'REQUEST_NOT_PENDING',
  UnknownDelivery = 'UNKNOWN_DELIVERY',
  /** The internal stream channel's handshake reached another gateway process of the instance than the one it names. */
  Misdirected = 'MISDIRECTED',
  NotFound = 'NOT_FOUND',
  /** A method the path does not serve (405, with `Allow` and `allow`: the methods it serves). */
  MethodNotAllowed = 'METHOD_NOT_ALLOWED',
  /** The request needs the other delivery topology (docs/topologies.md). */
  WrongTopology = 'WRONG_TOPOLOGY',
  /** An operator command the current ownership state refuses (an unknown instance, a drained target). */
  OwnershipConflict = 'OWNERSHIP_CONFLICT',
  /** A subscription move to an instance whose dispatch run is not live (nobody would deliver it), not forced. */
  InstanceNotLive = 'INSTANCE_NOT_LIVE',
  /** A subscription move that lost: the subscription is no longer on the instance the move was from. */
  PlacementConflict = 'PLACEMENT_CONFLICT',
  /** A principal already has its most active publisher secrets (two, for rotation): delete one first. */
  SecretLimitReached = 'SECRET_LIMIT_REACHED',
  /** A tenant has its most A2A agents (EVENTMESH_AGENTS_MAX_PER_TENANT); nothing was created. */
  AgentLimitReached = 'AGENT_LIMIT_REACHED',
  /** A tenant's topic of that name exists already, or the name is one of the operator's shared topics. */
  TopicExists = 'TOPIC_EXISTS',
  /** The tenant has as many topics as EVENTMESH_KAFKA_TENANT_TOPICS_MAX allows. */
  TopicLimitReached = 'TOPIC_LIMIT_REACHED',
  /** A topic a subscription still reads is not deleted. */
  TopicInUse = 'TOPIC_IN_USE',
  Unauthenticated = 'UNAUTHENTICATED',
  Forbidden = 'FORBIDDEN',
  QuotaExceeded = 'QUOTA_EXCEEDED',
  /**
   * A publish larger than the tenant's whole burst (events or bytes): it could never pass, however long the caller
   * waited, so it is not a 429; the body names the largest publish allowed.
   */
  BatchExceedsBurst = 'BATCH_EXCEEDS_BURST',
  /** A tenant holds its most request-replies waiting in this gateway process (another tenant's are not held back). */
  TooManyPendingRequests = 'TOO_MANY_PENDING_REQUESTS',
  /** A plain HTTP request to a WebSocket-only route (no `Upgrade: websocket`). */
  UpgradeRequired = 'UPGRADE_REQUIRED',
  /** A client did not send its request's headers, or the whole request, within the HTTP server's timeouts. */
  ClientTimeout = 'CLIENT_TIMEOUT',
  KafkaUnavailable = 'KAFKA_UNAVAILABLE',
  /** A bound on held work (producer queue, connections, pending requests) is reached; nothing was taken. */
  Overloaded = 'OVERLOADED',
  /** A subscription already has its most long-poll consumer names. */
  TooManyConsumers = 'TOO_MANY_CONSUMERS',
  DependencyUnavailable = 'DEPENDENCY_UNAVAILABLE',
  /** The process is shutting down; another instance (or this one, restarted) takes the request. */
  ShuttingDown = 'SHUTTING_DOWN',
  /** A streaming session to an agent no replica of which serves in the caller's tenant (docs/streaming-sessions.md). */
  SessionAgentNotFound = 'SESSION_AGENT_NOT_FOUND',
  /** The agent replica a session is bound to disconnected, or the instance holding it cannot be reached: the session ended. */
  AgentGone = 'AGENT_GONE',
  /** The agent's handler failed the call (its message is the agent's); the session stays open. */
  AgentError = 'AGENT_ERROR',
  /** A session id already open (a session is opened once), or a name this connection already serves. */
  SessionExists = 'SESSION_EXISTS',
  /** A frame for a session that is not open (never opened, closed, or ended by an error). */
  SessionNotFound = 'SESSION_NOT_FOUND',
  /** A call on a session whose previous call has not ended (one call at a time per session). */
  SessionBusy = 'SESSION_BUSY',
  /** A writer sent more than its credit, or a frame out of protocol: the session ends. */
  FlowControlViolation = 'FLOW_CONTROL_VIOLATION',
  /** A session pub/sub subscriber that could not keep up with its window was dropped. */
  SlowSubscriber = 'SLOW_SUBSCRIBER',
  /** A session pub/sub session ended (idle for its configured time, or its home instance went away). */
  SessionEnded = 'SESSION_ENDED',
  Internal = 'INTERNAL',
}

export class EventMeshError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly retriable = false,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'EventMeshError';
  }
}

/** HTTP status for each code; the gateway's error filter is the only reader. */
export const HTTP_STATUS_BY_CODE: Record<ErrorCode, number> = {
  [ErrorCode.InvalidCloudEvent]: 400,
  [ErrorCode.MalformedJson]: 400,
  [ErrorCode.InvalidRequest]: 400,
  [ErrorCode.WebhookValidationFailed]: 400,
  [ErrorCode.SinkNotAllowed]: 400,
  [ErrorCode.UnsupportedMediaType]: 415,
  [ErrorCode.PayloadTooLarge]: 413,
  [ErrorCode.UnknownTopic]: 404,
  [ErrorCode.SubscriptionNotFound]: 404,
  [ErrorCode.SubscriptionNameTaken]: 409,
  [ErrorCode.OffsetOutOfRange]: 400,
  [ErrorCode.SubscriptionDisabled]: 409,
  [ErrorCode.SubscriptionNotActive]: 409,
  [ErrorCode.DeadLetterNotFound]: 404,
  [ErrorCode.ReplayNotFound]: 404,
  [ErrorCode.ConfirmationRequired]: 400,
  [ErrorCode.InvalidAgentCard]: 400,
  [ErrorCode.AgentNotFound]: 404,
  [ErrorCode.DeadLetterResolved]: 409,
  [ErrorCode.PushConfigGone]: 409,
  [ErrorCode.PushNotDelivered]: 502,
  [ErrorCode.TaskNotFound]: 404,
  [ErrorCode.IllegalTransition]: 409,
  [ErrorCode.StaleRegistration]: 409,
  [ErrorCode.RequestTimeout]: 408,
  [ErrorCode.RequestNotPending]: 404,
  [ErrorCode.UnknownDelivery]: 409,
  [ErrorCode.Misdirected]: 421,
  [ErrorCode.NotFound]: 404,
  [ErrorCode.MethodNotAllowed]: 405,
  [ErrorCode.WrongTopology]: 409,
  [ErrorCode.OwnershipConflict]: 409,
  [ErrorCode.InstanceNotLive]: 409,
  [ErrorCode.PlacementConflict]: 409,
  [ErrorCode.SecretLimitReached]: 409,
  [ErrorCode.AgentLimitReached]: 409,
  [ErrorCode.TopicExists]: 409,
  [ErrorCode.TopicLimitReached]: 409,
  [ErrorCode.TopicInUse]: 409,
  [ErrorCode.Unauthenticated]: 401,
  [ErrorCode.Forbidden]: 403,
  [ErrorCode.QuotaExceeded]: 429,
  [ErrorCode.BatchExceedsBurst]: 413,
  [ErrorCode.TooManyPendingRequests]: 429,
  [ErrorCode.UpgradeRequired]: 426,
  [ErrorCode.ClientTimeout]: 408,
  [ErrorCode.KafkaUnavailable]: 503,
  [ErrorCode.Overloaded]: 503,
  [ErrorCode.TooManyConsumers]: 429,
  [ErrorCode.DependencyUnavailable]: 503,
  [ErrorCode.ShuttingDown]: 503,
  [ErrorCode.SessionAgentNotFound]: 404,
  [ErrorCode.AgentGone]: 502,
  [ErrorCode.AgentError]: 502,
  [ErrorCode.SessionExists]: 409,
  [ErrorCode.SessionNotFound]: 404,
  [ErrorCode.SessionBusy]: 409,
  [ErrorCode.FlowControlViolation]: 400,
  [ErrorCode.SlowSubscriber]: 409,
  [ErrorCode.SessionEnded]: 410,
  [ErrorCode.Internal]: 500,
};
