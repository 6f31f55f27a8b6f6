import { AdaptorRegistry, cloudEventsBatch, cloudEventsBinary, cloudEventsStructured } from '@libs/frame';

/**
 * The one place the protocols the gateway takes events in are registered: every route that reads events
 * (`POST /events/publish`, request-reply) and the body parsers ask this registry. A new protocol is an adaptor
 * (libs/frame/frame-adaptor.ts) added here; no route changes. The registration order is the order a 415 lists
 * them in. A2A is not here: its agents' endpoints speak JSON-RPC and convert with their own adaptor
 * (libs/a2a/protocol/a2a-frame.adaptor.ts).
 */
export function frameAdaptors(): AdaptorRegistry {
  return new AdaptorRegistry([cloudEventsStructured, cloudEventsBatch, cloudEventsBinary]);
}
