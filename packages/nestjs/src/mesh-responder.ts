import type { LoggerService } from '@nestjs/common';
import { RejectError } from '@eventmesh/client';
import { CloudEvent } from 'cloudevents';
import type { MeshClientPort, MeshEventHandler } from './mesh-client-port';

export interface ReplyDefaults {
  replyType?: string;
  replySource: string;
}

/**
 * The handler of a `@MeshResponder` method: calls it with the request, posts what it returned as the reply to the
 * request's `correlationid`, then (by resolving) acks the request. A throw nacks it, so the method runs again on
 * the redelivery while the requester still waits. A reply the runtime no longer wants (the requester timed out
 * or went away: 404 `REQUEST_NOT_PENDING`) is logged and the request acked: answering again cannot help. An event
 * without a `correlationid` is no request: it is rejected to the dead letters, where an operator sees it.
 */
export function responderHandler(
  call: (...args: unknown[]) => Promise<unknown>,
  client: Pick<MeshClientPort, 'reply'>,
  defaults: ReplyDefaults,
  logger: LoggerService,
): MeshEventHandler {
  return async (request, delivery) => {
    if (typeof request.correlationid !== 'string')
      throw new RejectError(`event ${request.id} has no correlationid: it is not a request`);
    const result = await call(request, delivery);
    const delivered = await client.reply(request, replyOf(request, result, defaults));
    if (!delivered) logger.warn?.(`reply to ${request.correlationid} dropped: the request is no longer pending`);
  };
}

/** The reply: the CloudEvent the method returned, or a new event whose data is the value it returned. */
export function replyOf(request: CloudEvent<unknown>, result: unknown, defaults: ReplyDefaults): CloudEvent<unknown> {
  if (result instanceof CloudEvent) return result;
  return new CloudEvent<unknown>({
    type: defaults.replyType ?? `${request.type}.reply`,
    source: defaults.replySource,
    ...(result === undefined ? {} : { datacontenttype: 'application/json', data: result }),
  });
}
