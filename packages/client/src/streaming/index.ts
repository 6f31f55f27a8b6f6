export { Streaming } from './streaming';
export type { StreamingOptions } from './connection';
export { StreamSession, CallStream, type OpenSessionOptions, type CallOptions, type RequestBody } from './session';
export {
  SessionPublisher,
  SessionSubscription,
  type Publication,
  type PresenceEvent,
  type SessionPosition,
  type SubscribeOptions,
} from './live';
export { AgentServer, type AgentHandler, type CallRequest, type CallContext, type ServeOptions } from './agent';
export {
  AgentNotFoundError,
  AgentGoneError,
  AgentCallError,
  SessionBusyError,
  FlowControlError,
  SessionCancelledError,
  SessionClosedError,
  ChunkTooLargeError,
  SlowSubscriberError,
  SessionEndedError,
} from './errors';
