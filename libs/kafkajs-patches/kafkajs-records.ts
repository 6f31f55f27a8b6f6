/**
 * kafkajs's v0 record format, written and read in one pass: {@link encodeRecord} writes the bytes kafkajs's
 * `recordBatch/record/v0` encoder writes, {@link decodeRecord} reads the object its decoder makes, {@link crc32c}
 * checksums a record batch. Pure functions; `kafkajs-encoding.ts` puts them in kafkajs's place.
 */

import { crc32c as nativeCrc32c } from '@node-rs/crc32';

/**
 * CRC32C of the bytes, unsigned: what kafkajs's `recordBatch/crc32C` computes a byte at a time in JavaScript,
 * computed by `@node-rs/crc32` (native, a maintained napi-rs package with prebuilt binaries): 0.13 ms for 650 KB (a
 * record batch of 500 events of 1 KiB), against 1.8 ms for kafkajs's, measured on this project's host.
 */
export function crc32c(bytes: Uint8Array): number {
  return nativeCrc32c(bytes);
}

/** The varint continuation test of kafkajs's `Encoder`: bits above the low seven of an unsigned 32-bit value. */
const UNSIGNED_INT32_MAX_NUMBER = 0xffffff80;

/** A record as kafkajs's produce request hands it to its record encoder. */
export interface KafkajsRecord {
  offsetDelta?: number;
  timestampDelta?: unknown;
  key?: unknown;
  value?: unknown;
  headers?: Record<string, unknown>;
}

/** What kafkajs's record batch encoder reads of an encoded record (an `Encoder`'s `buf` and `buffer`). */
export interface EncodedRecord {
  buf: Buffer;
  offset: number;
  readonly buffer: Buffer;
}

/**
 * A record (v0) in the bytes kafkajs's `recordBatch/record/v0` writes, in one buffer sized first: kafkajs builds an
 * `Encoder` (a zero-filled 512-byte buffer) for the record and one for each header, and copies each header's bytes
 * into the record's: with eight headers (a published event's), nine allocations and most of a publish's encoding
 * CPU.
 * Undefined for what this does not write the way kafkajs does (a timestamp delta that is not an integer below 2^52
 * either way, a key, value or header value that is not a string, a Buffer or null): kafkajs's own encoder takes those.
 */
export function encodeRecord(record: KafkajsRecord): EncodedRecord | undefined {
  const offsetDelta = record.offsetDelta ?? 0;
  const timestampDelta = record.timestampDelta ?? 0;
  const body = recordBodySize(record.key, record.value, record.headers, offsetDelta, timestampDelta);
  if (body < 0) return undefined;
  const total = sizeOfVarInt(body) + body;
  const buf = Buffer.allocUnsafe(total);
  const at = writeRecord(buf, 0, body, record.key, record.value, record.headers, offsetDelta, timestampDelta as number);
  if (at !== total) throw new Error(`record encoding wrote ${at} bytes of ${total}`);
  return { buf, offset: total, buffer: buf };
}

/**
 * The bytes of a record's body (attributes to headers, without its own length), or -1 for what this does not write
 * the way kafkajs does (a timestamp delta that is not an integer below 2^52 either way, a key, value or header value
 * that is not a string, a Buffer or null): kafkajs's own encoder takes those. A record takes
 * `sizeOfVarInt(body) + body` bytes.
 */
export function recordBodySize(
  key: unknown,
  value: unknown,
  headers: Record<string, unknown> | undefined,
  offsetDelta: number,
  timestampDelta: unknown,
): number {
  // Zigzagged, a delta below 2^52 either way stays a safe integer.
  if (typeof timestampDelta !== 'number' || !Number.isInteger(timestampDelta) || Math.abs(timestampDelta) >= 2 ** 52)
    return -1;
  if (!Number.isInteger(offsetDelta)) return -1;
  const k = bytesOf(key);
  const v = bytesOf(value);
  if (k === false || v === false) return -1;
  let body = 1 + sizeOfUVarLong(zigzagLong(timestampDelta)) + sizeOfVarInt(offsetDelta);
  body += sizeOfVarIntBytes(k) + sizeOfVarIntBytes(v);
  let count = 0;
  for (const name in headers) {
    if (!Object.prototype.hasOwnProperty.call(headers, name)) continue;
    const h = headers[name];
    if (Array.isArray(h)) {
      for (const one of h as unknown[]) {
        const size = headerSize(name, one);
        if (size < 0) return -1;
        body += size;
        count++;
      }
    } else {
      const size = headerSize(name, h);
      if (size < 0) return -1;
      body += size;
      count++;
    }
  }
  return body + sizeOfVarInt(count);
}

/**
 * Writes a record measured by {@link recordBodySize} (`body`, not -1) at `at`: its length, then its body, in the
 * bytes kafkajs's `recordBatch/record/v0` writes. Answers where it ends.
 */
export function writeRecord(
  buf: Buffer,
  at: number,
  body: number,
  key: unknown,
  value: unknown,
  headers: Record<string, unknown> | undefined,
  offsetDelta: number,
  timestampDelta: number,
): number {
  at = writeVarInt(buf, at, body);
  buf[at++] = 0; // attributes: none
  at = writeUVarLong(buf, at, zigzagLong(timestampDelta));
  at = writeVarInt(buf, at, offsetDelta);
  at = writeVarIntBytes(buf, at, bytesOf(key) as string | Buffer | null);
  at = writeVarIntBytes(buf, at, bytesOf(value) as string | Buffer | null);
  let count = 0;
  for (const name in headers) {
    if (!Object.prototype.hasOwnProperty.call(headers, name)) continue;
    const h = headers[name];
    count += Array.isArray(h) ? h.length : 1;
  }
  at = writeVarInt(buf, at, count);
  for (const name in headers) {
    if (!Object.prototype.hasOwnProperty.call(headers, name)) continue;
    const h = headers[name];
    if (Array.isArray(h)) for (const one of h as (string | Buffer)[]) at = writeHeader(buf, at, name, one);
    else at = writeHeader(buf, at, name, h as string | Buffer);
  }
  return at;
}

/** A header's bytes (its name and value, each with its varint length), or -1 for a value that is not a string or a Buffer. */
function headerSize(name: string, value: unknown): number {
  let valueBytes: number;
  if (typeof value === 'string') valueBytes = utf8Length(value);
  else if (Buffer.isBuffer(value)) valueBytes = value.length;
  else return -1;
  const nameBytes = utf8Length(name);
  return sizeOfVarInt(nameBytes) + nameBytes + sizeOfVarInt(valueBytes) + valueBytes;
}

function writeHeader(buf: Buffer, at: number, name: string, value: string | Buffer): number {
  const nameBytes = utf8Length(name);
  at = writeVarInt(buf, at, nameBytes);
  at = writeUtf8(buf, at, name, nameBytes);
  return writeVarIntBytes(buf, at, value);
}

/** A 64-bit zigzag of a safe integer below 2^52 either way, as a number. */
const zigzagLong = (value: number) => (value >= 0 ? value * 2 : -value * 2 - 1);

/** A key or value to write: null (absent), a string or a Buffer; false when kafkajs would write it otherwise. */
function bytesOf(v: unknown): string | Buffer | null | false {
  if (v === null || v === undefined) return null;
  return typeof v === 'string' || Buffer.isBuffer(v) ? v : false;
}

const zigzag = (value: number) => (value << 1) ^ (value >> 31);

/** Bytes of a zigzag varint (kafkajs's `writeVarInt`). */
export function sizeOfVarInt(value: number): number {
  let v = zigzag(value);
  let bytes = 1;
  while ((v & UNSIGNED_INT32_MAX_NUMBER) !== 0) {
    bytes++;
    v >>>= 7;
  }
  return bytes;
}

function sizeOfVarIntBytes(v: string | Buffer | null): number {
  if (v === null) return sizeOfVarInt(-1);
  const length = typeof v === 'string' ? utf8Length(v) : v.length;
  return sizeOfVarInt(length) + length;
}

/** Bytes of an unsigned varint of a non-negative safe integer (a zigzagged 64-bit value). */
function sizeOfUVarLong(value: number): number {
  let bytes = 1;
  while (value >= 0x80) {
    bytes++;
    value = Math.floor(value / 0x80);
  }
  return bytes;
}

/** Strings up to this length are measured and, when ASCII, written in JavaScript: a call into Buffer costs more. */
const SHORT_STRING = 64;

/** The string's UTF-8 length (header names and values are mostly short ASCII: counted here, without a native call). */
function utf8Length(s: string): number {
  if (s.length > SHORT_STRING) return Buffer.byteLength(s);
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= 0x80) return Buffer.byteLength(s);
  return s.length;
}

/** Writes `s` (`bytes` long in UTF-8) at `at`; answers where it ends. A UTF-8 length equal to its length: ASCII. */
function writeUtf8(buf: Buffer, at: number, s: string, bytes: number): number {
  if (bytes !== s.length || bytes > SHORT_STRING) return at + buf.write(s, at, bytes, 'utf8');
  for (let i = 0; i < bytes; i++) buf[at + i] = s.charCodeAt(i);
  return at + bytes;
}

function writeVarInt(buf: Buffer, at: number, value: number): number {
  let v = zigzag(value);
  while ((v & UNSIGNED_INT32_MAX_NUMBER) !== 0) {
    buf[at++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[at++] = v & 0x7f;
  return at;
}

function writeUVarLong(buf: Buffer, at: number, value: number): number {
  while (value >= 0x80) {
    buf[at++] = (value % 0x80) | 0x80;
    value = Math.floor(value / 0x80);
  }
  buf[at++] = value;
  return at;
}

function writeVarIntBytes(buf: Buffer, at: number, v: string | Buffer | null): number {
  if (v === null) return writeVarInt(buf, at, -1);
  if (typeof v === 'string') {
    const length = utf8Length(v);
    at = writeVarInt(buf, at, length);
    return writeUtf8(buf, at, v, length);
  }
  at = writeVarInt(buf, at, v.length);
  return at + v.copy(buf, at);
}

/** kafkajs's protocol `Decoder` as its record decoder reads it: the record's bytes and where it stands in them. */
export interface KafkajsDecoder {
  buffer: Buffer;
  offset: number;
}

/** What kafkajs's record batch decoder hands each record's decoder. */
export interface KafkajsBatchContext {
  firstOffset?: string;
  firstTimestamp?: string;
  maxTimestamp?: string;
  magicByte?: number;
  isControlBatch?: boolean;
  timestampType?: number;
  [key: string]: unknown;
}

/** kafkajs's `TimestampTypes.LOG_APPEND_TIME`. */
const LOG_APPEND_TIME = 1;

/**
 * A fetched record (v0) read into the object kafkajs's `recordBatch/record/v0/decoder` makes, from the decoder's
 * offset: the same fields, the same `Buffer` views of the key, value and header values, the same string offset and
 * timestamp. kafkajs adds the deltas with `Long` arithmetic and builds the headers object with a spread of the
 * object so far for each header (a published event's record has eight): 6.2-7.3 µs a record on this project's host,
 * 3.2-3.7 µs here. Undefined (the decoder where it was) for
 * what this does not read the way kafkajs does: a timestamp delta of more than 7 varint bytes, a base offset or
 * timestamp or a sum past 2^53, a header named `__proto__`.
 */
export function decodeRecord(decoder: KafkajsDecoder, batchContext: KafkajsBatchContext = {}): object | undefined {
  const buf = decoder.buffer;
  let at = decoder.offset;
  const attributes = buf.readInt8(at++);
  // The timestamp delta: a zigzagged varlong, read as a number while it has at most 49 bits.
  let zigzag = 0;
  let scale = 1;
  for (let bytes = 0; ; bytes++) {
    if (bytes === 7) return undefined;
    const b = buf[at++];
    zigzag += (b & 0x7f) * scale;
    scale *= 0x80;
    if (b < 0x80) break;
  }
  const timestampDelta = zigzag % 2 === 0 ? zigzag / 2 : -(zigzag + 1) / 2;
  const { firstOffset, firstTimestamp, maxTimestamp, magicByte, isControlBatch = false, timestampType } = batchContext;
  let timestamp: string;
  if (timestampType === LOG_APPEND_TIME && maxTimestamp) timestamp = maxTimestamp;
  else {
    const sum = safeSum(firstTimestamp, timestampDelta);
    if (sum === undefined) return undefined;
    timestamp = sum;
  }
  cursor = at;
  const offset = safeSum(firstOffset, readVarInt(buf));
  if (offset === undefined) return undefined;
  let length = readVarInt(buf);
  const key = length === -1 ? null : buf.slice(cursor, (cursor += length));
  length = readVarInt(buf);
  const value = length === -1 ? null : buf.slice(cursor, (cursor += length));
  const count = readVarInt(buf);
  const headers: Record<string, unknown> = {};
  for (let i = 0; i < count; i++) {
    length = readVarInt(buf);
    const name = length === -1 ? 'null' : textOf(buf, cursor, (cursor += length));
    length = readVarInt(buf);
    const v = length === -1 ? null : buf.slice(cursor, (cursor += length));
    if (name === '__proto__') return undefined;
    const prior = headers[name];
    headers[name] = prior === undefined ? v : Array.isArray(prior) ? prior.concat([v]) : [prior, v];
  }
  decoder.offset = cursor;
  return {
    magicByte,
    attributes,
    timestamp,
    offset,
    key,
    value,
    headers,
    isControlRecord: isControlBatch,
    batchContext,
  };
}

/** `base` (a decimal string) plus `delta` as a decimal string, when both and the sum are safe integers. */
function safeSum(base: string | undefined, delta: number): string | undefined {
  const n = Number(base);
  if (base === undefined || base === '' || !Number.isSafeInteger(n)) return undefined;
  const sum = n + delta;
  return Number.isSafeInteger(sum) ? String(sum) : undefined;
}

/** Where {@link readVarInt} reads next (one decode at a time: the event loop runs one). */
let cursor = 0;

/** The zigzagged varint at {@link cursor}, read with the arithmetic of kafkajs's `Decoder.readVarInt`; moves past it. */
function readVarInt(buf: Buffer): number {
  let result = 0;
  let shift = 0;
  let b: number;
  do {
    b = buf[cursor++];
    result += (b & 0x7f) << shift;
    shift += 7;
  } while (b >= 0x80);
  return (result >>> 1) ^ -(result & 1);
}

/** UTF-8 text of `buf[from, to)`: a short ASCII name (a header's) in JavaScript, anything else by Buffer. */
function textOf(buf: Buffer, from: number, to: number): string {
  if (to - from > SHORT_STRING) return buf.toString('utf8', from, to);
  let text = '';
  for (let i = from; i < to; i++) {
    const c = buf[i];
    if (c >= 0x80) return buf.toString('utf8', from, to);
    text += String.fromCharCode(c);
  }
  return text;
}
