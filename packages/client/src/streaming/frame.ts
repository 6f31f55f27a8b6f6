/**
 * The session frame on the wire (docs/streaming-sessions.md#frames): the runtime's encoding, read and written by the
 * SDK. A fixed 20-byte header (version, kind, id length, attributes length, call, n), the id, the attributes as a
 * JSON object, then the data. libs/frame/session-frame.spec.ts holds this copy to the runtime's.
 */
const VERSION = 1;
const HEADER = 20;

export const FRAME_KINDS = [
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
export type FrameKind = (typeof FRAME_KINDS)[number];

export type Attributes = Record<string, string | number | boolean>;

export interface Frame {
  kind: FrameKind;
  id: string;
  call: number;
  n: number;
  attributes: Attributes;
  data: Buffer;
}

const EMPTY = Buffer.alloc(0);

export function encodeFrame(f: {
  kind: FrameKind;
  id: string;
  call?: number;
  n?: number;
  attributes?: Attributes;
  data?: Uint8Array;
}): Buffer {
  const id = Buffer.from(f.id, 'utf8');
  const attributes =
    f.attributes && Object.keys(f.attributes).length > 0 ? Buffer.from(JSON.stringify(f.attributes), 'utf8') : EMPTY;
  const data = f.data ?? EMPTY;
  const out = Buffer.allocUnsafe(HEADER + id.length + attributes.length + data.length);
  out.writeUInt8(VERSION, 0);
  out.writeUInt8(FRAME_KINDS.indexOf(f.kind) + 1, 1);
  out.writeUInt16BE(id.length, 2);
  out.writeUInt32BE(attributes.length, 4);
  out.writeUInt32BE(f.call ?? 0, 8);
  out.writeDoubleBE(f.n ?? 0, 12);
  id.copy(out, HEADER);
  attributes.copy(out, HEADER + id.length);
  out.set(data, HEADER + id.length + attributes.length);
  return out;
}

/** Reads a frame the runtime sent; undefined for what is not one (another version). */
export function decodeFrame(raw: Buffer): Frame | undefined {
  if (raw.length < HEADER || raw.readUInt8(0) !== VERSION) return undefined;
  const kind = FRAME_KINDS[raw.readUInt8(1) - 1];
  const idBytes = raw.readUInt16BE(2);
  const attributeBytes = raw.readUInt32BE(4);
  const dataAt = HEADER + idBytes + attributeBytes;
  if (kind === undefined || dataAt > raw.length) return undefined;
  let attributes: Attributes = {};
  if (attributeBytes > 0) {
    try {
      attributes = JSON.parse(raw.toString('utf8', HEADER + idBytes, dataAt)) as Attributes;
    } catch {
      return undefined;
    }
  }
  return {
    kind,
    id: raw.toString('utf8', HEADER, HEADER + idBytes),
    call: raw.readUInt32BE(8),
    n: raw.readDoubleBE(12),
    attributes,
    data: dataAt === raw.length ? EMPTY : raw.subarray(dataAt),
  };
}
