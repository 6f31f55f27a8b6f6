/**
 * The internal frame of streaming sessions (docs/streaming-sessions.md#frames): a fixed header, key-value
 * attributes and raw data, like the event frame, but for the messages of a session rather than events. One binary
 * encoding serves the client's WebSocket and the link between instances, so a chunk crosses the runtime without
 * being decoded and encoded again: the gateway reads the header and forwards the bytes it received.
 *
 * ```
 * offset 0   u8   version (1)
 *        1   u8   kind (SESSION_FRAME_KINDS)
 *        2   u16  id length, in UTF-8 bytes
 *        4   u32  attributes length, in UTF-8 bytes of a JSON object (0: none)
 *        8   u32  call: the call's number in its session (Mode 1), else 0
 *        12  f64  n: a number whose meaning the kind gives (credit bytes, window, position), else 0
 *        20  id, attributes, then the data (the rest of the message)
 * ```
 */
export const SESSION_FRAME_VERSION = 1;
export const SESSION_FRAME_HEADER_BYTES = 20;
/** The longest id a frame carries: a name (128) and a UUID, or a runtime's own id. */
export const SESSION_FRAME_MAX_ID_BYTES = 512;
/** The most attribute bytes a frame carries (an error's message, a position): never a payload. */
export const SESSION_FRAME_MAX_ATTRIBUTE_BYTES = 16 * 1024;

/**
 * The kinds, by their byte. Mode 1 (a streaming call): `open` -> `opened`, then per call `request` -> `chunk`... ->
 * `end` | `error`, `cancel` from the caller, `credit` from the reader, `close` ends the session; `serve` ->
 * `served` and `unserve` name what a connection serves. Mode 2 (session pub/sub): `publisher` -> `opened`,
 * `publish`, `subscribe` -> `subscribed`, `chunk` (a publication, `n` its position), `presence`, `unsubscribe`,
 * and `end` / `error` / `credit` as in Mode 1. `relay` is the runtime's own, between its processes: frames a client
 * of the SSE fallback posted to another process than the one holding its stream.
 */
export const SESSION_FRAME_KINDS = [
  'open',
  'opened',
  'request',
  'chunk',
  'end',
  'error',
  'cancel',
  'credit',
  'close',
  'serve',
  'served',
  'unserve',
  'publisher',
  'publish',
  'subscribe',
  'subscribed',
  'unsubscribe',
  'presence',
  'relay',
] as const;
export type SessionFrameKind = (typeof SESSION_FRAME_KINDS)[number];

const KIND_BYTE = new Map<SessionFrameKind, number>(SESSION_FRAME_KINDS.map((k, i) => [k, i + 1]));

export type SessionAttributes = Record<string, string | number | boolean>;

export interface SessionFrame {
  kind: SessionFrameKind;
  /** The session (`<agent>:<uuid>`), the session name, or the agent name the frame is about. */
  id: string;
  call: number;
  n: number;
  attributes: SessionAttributes;
  /** The payload (a request, a chunk); empty when the kind has none. */
  data: Buffer;
}

/** A frame that cannot be read: too short, a version or kind this runtime does not know, bad lengths. */
export class SessionFrameError extends Error {}

const NO_ATTRIBUTES: SessionAttributes = Object.freeze({}) as SessionAttributes;
const EMPTY = Buffer.alloc(0);

export function encodeSessionFrame(frame: {
  kind: SessionFrameKind;
  id: string;
  call?: number;
  n?: number;
  attributes?: SessionAttributes;
  data?: Buffer | Uint8Array;
}): Buffer {
  const id = Buffer.from(frame.id, 'utf8');
  const attributes =
    frame.attributes && Object.keys(frame.attributes).length > 0
      ? Buffer.from(JSON.stringify(frame.attributes), 'utf8')
      : EMPTY;
  const data = frame.data ?? EMPTY;
  if (id.length > SESSION_FRAME_MAX_ID_BYTES) throw new SessionFrameError('the id is too long');
  const out = Buffer.allocUnsafe(SESSION_FRAME_HEADER_BYTES + id.length + attributes.length + data.length);
  out.writeUInt8(SESSION_FRAME_VERSION, 0);
  out.writeUInt8(KIND_BYTE.get(frame.kind)!, 1);
  out.writeUInt16BE(id.length, 2);
  out.writeUInt32BE(attributes.length, 4);
  out.writeUInt32BE(frame.call ?? 0, 8);
  out.writeDoubleBE(frame.n ?? 0, 12);
  id.copy(out, SESSION_FRAME_HEADER_BYTES);
  attributes.copy(out, SESSION_FRAME_HEADER_BYTES + id.length);
  out.set(data, SESSION_FRAME_HEADER_BYTES + id.length + attributes.length);
  return out;
}

/** Reads a frame; its data is a view of `raw` (no copy). Throws {@link SessionFrameError} for what it cannot read. */
export function decodeSessionFrame(raw: Buffer): SessionFrame {
  if (raw.length < SESSION_FRAME_HEADER_BYTES) throw new SessionFrameError('shorter than the frame header');
  const version = raw.readUInt8(0);
  if (version !== SESSION_FRAME_VERSION) throw new SessionFrameError(`frame version ${version} is not known`);
  const kind = SESSION_FRAME_KINDS[raw.readUInt8(1) - 1];
  if (kind === undefined) throw new SessionFrameError(`frame kind ${raw.readUInt8(1)} is not known`);
  const idBytes = raw.readUInt16BE(2);
  const attributeBytes = raw.readUInt32BE(4);
  if (idBytes > SESSION_FRAME_MAX_ID_BYTES || attributeBytes > SESSION_FRAME_MAX_ATTRIBUTE_BYTES)
    throw new SessionFrameError('the id or the attributes are too long');
  const dataAt = SESSION_FRAME_HEADER_BYTES + idBytes + attributeBytes;
  if (dataAt > raw.length) throw new SessionFrameError('the lengths run past the end of the frame');
  const n = raw.readDoubleBE(12);
  if (!Number.isFinite(n)) throw new SessionFrameError('n is not a finite number');
  return {
    kind,
    id: raw.toString('utf8', SESSION_FRAME_HEADER_BYTES, SESSION_FRAME_HEADER_BYTES + idBytes),
    call: raw.readUInt32BE(8),
    n,
    attributes:
      attributeBytes === 0
        ? NO_ATTRIBUTES
        : parseAttributes(raw.toString('utf8', SESSION_FRAME_HEADER_BYTES + idBytes, dataAt)),
    data: dataAt === raw.length ? EMPTY : raw.subarray(dataAt),
  };
}

function parseAttributes(text: string): SessionAttributes {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new SessionFrameError('the attributes are not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new SessionFrameError('the attributes are not a JSON object');
  for (const value of Object.values(parsed as Record<string, unknown>))
    if (!['string', 'number', 'boolean'].includes(typeof value))
      throw new SessionFrameError('an attribute is not a string, number or boolean');
  return parsed as SessionAttributes;
}

/** The frame's data length without decoding it (the credit a chunk takes): everything after id and attributes. */
export function sessionFrameDataBytes(raw: Buffer): number {
  return raw.length - SESSION_FRAME_HEADER_BYTES - raw.readUInt16BE(2) - raw.readUInt32BE(4);
}
