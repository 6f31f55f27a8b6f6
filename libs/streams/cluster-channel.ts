import type { WebSocket } from 'ws';
import { attributesOf, EventFrame, frameFromAttributes } from '@libs/frame';
import { createLogger } from '@libs/logging';
import { ClientAction, MAX_ACK_DEADLINE_MS, StreamHub, StreamOutcome, StreamPolicy } from './stream-hub';
import { sendInTurn } from './turn-writes';

/**
 * The internal stream channel between instances (docs/topologies.md#streams-in-every-topology): the instance
 * that dispatches a STREAM subscription (a partition's owner, or the instance it is pinned to) opens one
 * WebSocket to each gateway process that holds clients of it, at {@link CHANNEL_PATH} on that process's HTTP
 * server, and multiplexes deliveries over it: `deliver` goes to the holder, which hands it to its own StreamHub
 * (the clients' windows, delivery ids carrying the owner's epoch) and sends back one `answer` when the client
 * acks, nacks, rejects, times out or leaves. `cancel` withdraws a delivery the owner no longer waits for.
 * `disconnect` (any instance may send it) ends one client's connection for an operator (stream-clients.ts).
 * `settle` (any instance may send it) hands the holder a client's answer (ack, nack, reject) that reached another
 * instance: an SSE or long-poll client behind a load balancer posts its answers wherever the balancer sends them.
 */
export const CHANNEL_PATH = '/internal/streams/channel';
/** The handshake header carrying the cluster token (cluster-credential.ts). */
export const CLUSTER_TOKEN_HEADER = 'x-eventmesh-cluster-token';
/** The handshake query naming the holder the token was made for (a gateway process of several sharing a port). */
export const HOLDER_QUERY = 'holder';

/** An event on the wire: its attributes and its data in base64 (data is bytes, of any content type). */
export interface WireFrame {
  attributes: Record<string, string | number | boolean>;
  data: string | null;
}

export type OwnerMessage =
  | {
      type: 'deliver';
      id: number;
      subscriptionId: string;
      ownerEpoch: number;
      policy: StreamPolicy;
      ackTimeoutMs: number;
      frame: WireFrame;
    }
  | { type: 'cancel'; id: number }
  /** An operator disconnects a client this holder holds; answered `ack` (done) or `gone` (no such client here). */
  | { type: 'disconnect'; id: number; subscriptionId: string; clientId: string }
  /** A client's answer (or extension) for a delivery this holder may hold; answered `ack` (it held it) or `gone`. */
  | { type: 'settle'; id: number; subscriptionId: string; deliveryId: string; outcome: ClientAction };

export type HolderMessage =
  | { type: 'answer'; id: number; outcome: StreamOutcome }
  /** The client extended the delivery's ack deadline to `deadlineMs` from now: the owner waits that long (and the slack). */
  | { type: 'extend'; id: number; deadlineMs: number };

export function frameToWire(frame: EventFrame): WireFrame {
  return { attributes: attributesOf(frame), data: frame.data === undefined ? null : frame.data.toString('base64') };
}

export function frameFromWire(wire: WireFrame): EventFrame {
  return frameFromAttributes(wire.attributes, wire.data === null ? null : Buffer.from(wire.data, 'base64'));
}

const OUTCOME_KINDS = new Set(['ack', 'nack', 'reject', 'timeout', 'gone']);

/** A holder's answer, or undefined for anything that is not one (a peer of another version, a damaged message). */
export function parseHolderMessage(raw: string): HolderMessage | undefined {
  try {
    const m = JSON.parse(raw) as Partial<Record<string, unknown>> & { outcome?: { kind?: unknown } };
    if (!Number.isSafeInteger(m.id)) return undefined;
    if (m.type === 'extend') return isDeadline(m.deadlineMs) ? (m as HolderMessage) : undefined;
    if (m.type !== 'answer' || !OUTCOME_KINDS.has(m.outcome?.kind as string)) return undefined;
    return m as HolderMessage;
  } catch {
    return undefined;
  }
}

function isDeadline(ms: unknown): boolean {
  return Number.isSafeInteger(ms) && (ms as number) >= 1 && (ms as number) <= MAX_ACK_DEADLINE_MS;
}

function isClientAction(outcome: unknown): outcome is ClientAction {
  const o = outcome as Partial<Record<string, unknown>> | null | undefined;
  if (o?.kind === 'ack') return true;
  if (o?.kind === 'extend') return isDeadline(o.deadlineMs);
  if (o?.kind === 'nack') return Number.isSafeInteger(o.delayMs) && (o.delayMs as number) >= 0;
  return o?.kind === 'reject' && typeof o.reason === 'string';
}

export function parseOwnerMessage(raw: string): OwnerMessage | undefined {
  try {
    const m = JSON.parse(raw) as Partial<OwnerMessage> & Record<string, unknown>;
    if (!Number.isSafeInteger(m.id)) return undefined;
    if (m.type === 'cancel') return m as OwnerMessage;
    if (m.type === 'disconnect' && typeof m.subscriptionId === 'string' && typeof m.clientId === 'string')
      return m as OwnerMessage;
    if (
      m.type === 'settle' &&
      typeof m.subscriptionId === 'string' &&
      typeof m.deliveryId === 'string' &&
      isClientAction(m.outcome)
    )
      return m as OwnerMessage;
    if (
      m.type === 'deliver' &&
      typeof m.subscriptionId === 'string' &&
      Number.isSafeInteger(m.ownerEpoch) &&
      Number.isSafeInteger(m.ackTimeoutMs) &&
      typeof m.frame === 'object' &&
      m.frame !== null
    ) {
      return m as OwnerMessage;
    }
    return undefined;
  } catch {
    return undefined;
  }
}

/**
 * The holder's end of one channel: each `deliver` becomes a delivery of the local hub (no client here: `gone`
 * at once), answered when it settles. When the channel closes, every delivery still pending on it
 * is withdrawn from the hub (`gone`; a client's late answer is refused as stale): the owner, which saw the same
 * close, has settled it as `gone` and delivers the event again.
 */
export function serveChannel(socket: WebSocket, hub: StreamHub, peer: string): void {
  const log = createLogger('StreamChannel');
  const inflight = new Map<number, AbortController>();
  socket.on('message', (raw) => {
    const message = parseOwnerMessage(String(raw));
    if (!message) {
      log.warn({ peer }, 'unreadable message on the stream channel; ignored');
      return;
    }
    if (message.type === 'cancel') {
      inflight.get(message.id)?.abort();
      return;
    }
    if (message.type === 'disconnect') {
      const kicked = hub.kick(message.subscriptionId, message.clientId);
      if (kicked)
        log.info(
          { peer, subscription: message.subscriptionId, client: message.clientId },
          'stream client disconnected by an operator (asked by another instance)',
        );
      answer(message.id, kicked ? { kind: 'ack' } : { kind: 'gone' });
      return;
    }
    if (message.type === 'settle') {
      answer(
        message.id,
        hub.act(message.subscriptionId, message.deliveryId, message.outcome) ? { kind: 'ack' } : { kind: 'gone' },
      );
      return;
    }
    if (inflight.has(message.id)) return;
    const abort = new AbortController();
    inflight.set(message.id, abort);
    const target = {
      id: message.subscriptionId,
      config: { policy: message.policy, ackTimeoutMs: message.ackTimeoutMs },
    };
    let frame: EventFrame;
    try {
      frame = frameFromWire(message.frame);
    } catch (e) {
      inflight.delete(message.id);
      answer(message.id, { kind: 'reject', reason: `the forwarded event is unreadable: ${(e as Error).message}` });
      return;
    }
    const onExtend = (deadlineMs: number) => send({ type: 'extend', id: message.id, deadlineMs });
    void hub
      .deliver(target, frame, abort.signal, {
        epoch: message.ownerEpoch,
        onlyIfConnected: true,
        withdrawOnAbort: true,
        onExtend,
      })
      .then((outcome) => {
        if (inflight.delete(message.id)) answer(message.id, outcome);
      });
  });
  socket.on('close', () => {
    for (const abort of inflight.values()) abort.abort();
    inflight.clear();
  });
  socket.on('error', (e) => log.warn({ peer, error: e.message }, 'stream channel error'));

  function answer(id: number, outcome: StreamOutcome): void {
    send({ type: 'answer', id, outcome });
  }

  function send(message: HolderMessage): void {
    if (socket.readyState !== socket.OPEN) return;
    sendInTurn(socket, JSON.stringify(message));
  }
}
