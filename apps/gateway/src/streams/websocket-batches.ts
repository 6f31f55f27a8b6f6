import { ErrorCode, EventMeshError } from '@libs/errors';
import { jsonArrayBytesOf } from '@libs/frame';
import { sendInTurn, sendTextInTurn, type StreamBatchDelivery, type StreamDelivery } from '@libs/streams';
import { outcomeOf, wireJsonOf, type Answer } from './streams.controller';
import type { ClientAction } from '@libs/streams';

/** Answers one `answers` message carries at most (a client's largest window). */
export const MAX_ANSWERS_PER_MESSAGE = 1000;

type Socket = Parameters<typeof sendInTurn>[0];

/**
 * The WebSocket stream's batched frames (`?frames=batch`): the deliveries handed to one socket in one turn of the
 * event loop (a lane starts many at once) leave as one `{"type":"events","deliveries":[{deliveryId,event}...]}`
 * message, parsed once by the client, rather than one message each.
 */
export function batchedPush(socket: Socket): (d: StreamDelivery) => void {
  let queued: StreamDelivery[] | undefined;
  return (d) => {
    if (queued) {
      queued.push(d);
      return;
    }
    queued = [d];
    setImmediate(() => {
      let message = '{"type":"events","deliveries":[';
      for (let i = 0; i < queued!.length; i++) message += (i > 0 ? ',' : '') + wireJsonOf(queued![i]);
      queued = undefined;
      sendInTurn(socket, `${message}]}`);
    });
  };
}

/**
 * A batched subscription's batch (stream-hub.ts, `deliverBatch`), one delivery:
 * `{"type":"batch","deliveryId","events":[...]}`, the events in structured JSON, byte for byte as the lane wrote
 * them, in one text message. One answer for `deliveryId` answers every event of it.
 */
export function batchPush(socket: Parameters<typeof sendTextInTurn>[0]): (d: StreamBatchDelivery) => void {
  return (d) =>
    sendTextInTurn(
      socket,
      jsonArrayBytesOf(d.entries, `{"type":"batch","deliveryId":${JSON.stringify(d.deliveryId)},"events":[`, ']}'),
    );
}

/**
 * The answers of `{"type":"answers","answers":[{"type":"ack"|"nack"|"reject"|"extend","deliveryId",...}...]}`,
 * each checked as a single answer is, all of them before any is applied: one bad answer refuses the message whole
 * (its index in the error), so nothing of it changes anything.
 */
export function answersOf(message: { answers?: unknown }): { deliveryId: string; action: ClientAction }[] {
  const list = message.answers;
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_ANSWERS_PER_MESSAGE) {
    throw new EventMeshError(
      ErrorCode.InvalidRequest,
      `answers must be a list of 1 to ${MAX_ANSWERS_PER_MESSAGE} answers`,
      { field: 'answers' },
    );
  }
  return list.map((raw: unknown, index) => {
    const a = (typeof raw === 'object' && raw !== null ? raw : {}) as Answer & { type?: unknown };
    if (typeof a.deliveryId !== 'string') {
      throw new EventMeshError(ErrorCode.InvalidRequest, `answer ${index}: deliveryId is required`, {
        field: 'deliveryId',
        index,
      });
    }
    return { deliveryId: a.deliveryId, action: outcomeOf({ ...a, action: a.type }, index) };
  });
}
