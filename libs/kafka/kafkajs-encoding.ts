import Module from 'node:module';
import { crc32c as nativeCrc32c } from '@node-rs/crc32';
import { createLogger } from '@libs/logging';

/** The kafkajs release whose `Encoder` this module knows (package.json pins it). */
export const KAFKAJS_VERSION = '2.2.4';

/** The part of kafkajs's protocol `Encoder` (src/protocol/encoder.js) the faster methods replace. */
interface KafkajsEncoder {
  buf: Buffer;
  offset: number;
  ensureAvailable(length: number): void;
  writeUVarInt(value: number): KafkajsEncoder;
}
interface KafkajsEncoderClass {
  prototype: KafkajsEncoder;
  nextPowerOfTwo(value: number): number;
}

const UNSIGNED_INT32_MAX_NUMBER = 0xffffff80;

/**
 * CRC32C of the bytes, unsigned: what kafkajs's `recordBatch/crc32C` computes a byte at a time in JavaScript,
 * computed by `@node-rs/crc32` (native, a maintained napi-rs package with prebuilt binaries): 0.13 ms for 650 KB (a
 * record batch of 500 events of 1 KiB), against 1.8 ms for kafkajs's, measured on this project's host.
 */
export function crc32c(bytes: Uint8Array): number {
  return nativeCrc32c(bytes);
}

export interface FastKafkajsEncoding {
  /** The encoder's growth and varints. */
  encoder: boolean;
  /** The record batch checksum. */
  crc32c: boolean;
  /** Each record written in one buffer ({@link encodeRecord}). */
  record: boolean;
  /** Each fetched record read without kafkajs's Long arithmetic and header copies ({@link decodeRecord}). */
  recordDecoder: boolean;
}

let installed: FastKafkajsEncoding | undefined;

/** Whether the kafkajs loaded is the pinned release that `change` (a replacement of its internals) mirrors; logged when not. */
export function isPinnedKafkajs(change: string): boolean {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const version = (require('kafkajs/package.json') as { version: string }).version;
  if (version === KAFKAJS_VERSION) return true;
  createLogger('kafka').warn(
    { version, expected: KAFKAJS_VERSION },
    `kafkajs is not the release ${change} was written for; it is left as it is`,
  );
  return false;
}

/**
 * Makes kafkajs's record encoding cheaper without forking it, by replacing two methods of its protocol
 * `Encoder` with ones that write the same bytes:
 *
 * - `ensureAvailable` grows the buffer with `Buffer.allocUnsafe` (pooled below 4 KiB) instead of a zero-filled
 *   `Buffer.alloc`. Every write of the encoder goes to `offset` after `ensureAvailable` and advances it, and the
 *   encoder hands out only `buf[0, offset)`, so no byte left uninitialised is ever read or sent.
 * - `writeUVarInt` writes the varint's bytes into the buffer instead of building an array and a `Buffer.from`
 *   of it: two allocations for each length and count of every record and header.
 *
 *
 * And the record batch's CRC32C, which kafkajs computes a byte at a time in JavaScript, is computed natively by
 * {@link crc32c}. kafkajs loads its record batch encoder (and with it the checksum) at its first
 * produce request; the faster checksum takes the place of kafkajs's `recordBatch/crc32C` module in Node's module
 * cache before that. Once the encoder is loaded, it keeps the checksum it has (reported `crc32c: false`). A wrong
 * checksum could not go unnoticed: the broker checks it and refuses the batch (CORRUPT_MESSAGE), so the publish
 * fails and is never answered 202.
 *
 * A record of 1 KiB with six `ce_*` headers cost 13-15 µs to encode, 9-11.5 µs with the encoder methods, and the
 * checksum of a batch of 500 such records 1.8-2.6 ms, 0.13 ms with this one (docs/benchmarks.md). The record itself is
 * written by {@link encodeRecord}, in the place of kafkajs's record encoder (which built a zero-filled 512-byte
 * encoder for the record and for each header): a published event's record (a small value, eight headers) took 21-31 µs
 * in kafkajs's encoder on this project's host, 1.6-2.2 µs in this one. Fetched records are read by
 * {@link decodeRecord} in the place of kafkajs's record decoder, into the same objects.
 *
 * Applies only to the pinned kafkajs release, whose code this module mirrors (property tests compare the bytes
 * and checksums with kafkajs's own); with any other release it leaves kafkajs as it is and logs a warning.
 * Idempotent; reports what is in place. This is shared by every kafkajs client of the process, and changes no byte
 * on the wire.
 */
export function installFastKafkajsEncoding(): FastKafkajsEncoding {
  if (installed !== undefined) return installed;
  if (!isPinnedKafkajs('the faster record encoding'))
    return (installed = { encoder: false, crc32c: false, record: false, recordDecoder: false });
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Encoder = require('kafkajs/src/protocol/encoder') as KafkajsEncoderClass;
  Encoder.prototype.ensureAvailable = function ensureAvailable(this: KafkajsEncoder, length: number): void {
    if (this.offset + length > this.buf.length) {
      const grown = Buffer.allocUnsafe(Encoder.nextPowerOfTwo(this.offset + length));
      this.buf.copy(grown, 0, 0, this.offset);
      this.buf = grown;
    }
  };
  Encoder.prototype.writeUVarInt = function writeUVarInt(this: KafkajsEncoder, value: number): KafkajsEncoder {
    // At most 5 bytes: after the first `>>>=` the value is an unsigned 32-bit integer.
    this.ensureAvailable(5);
    const buf = this.buf;
    let offset = this.offset;
    while ((value & UNSIGNED_INT32_MAX_NUMBER) !== 0) {
      buf[offset++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    buf[offset++] = value & 0x7f;
    this.offset = offset;
    return this;
  };
  installed = {
    encoder: true,
    crc32c: installChecksum(),
    record: installRecordEncoder(),
    recordDecoder: installRecordDecoder(),
  };
  if (!installed.crc32c)
    createLogger('kafka').warn('kafkajs had loaded its record batch encoder already; it keeps its own CRC32C');
  if (!installed.record)
    createLogger('kafka').warn('kafkajs keeps its own record encoder: its produce request had loaded it already');
  if (!installed.recordDecoder)
    createLogger('kafka').warn('kafkajs keeps its own record decoder: its record batch decoder had loaded it already');
  return installed;
}

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
  // Zigzagged, a delta below 2^52 either way stays a safe integer.
  if (typeof timestampDelta !== 'number' || !Number.isInteger(timestampDelta) || Math.abs(timestampDelta) >= 2 ** 52)
    return undefined;
  if (!Number.isInteger(offsetDelta)) return undefined;
  const key = bytesOf(record.key);
  const value = bytesOf(record.value);
  if (key === false || value === false) return undefined;
  const headers = record.headers ?? {};
  const names: string[] = [];
  const values: (string | Buffer)[] = [];
  for (const name of Object.keys(headers)) {
    const v = headers[name];
    for (const one of Array.isArray(v) ? (v as unknown[]) : [v]) {
      if (typeof one !== 'string' && !Buffer.isBuffer(one)) return undefined;
      names.push(name);
      values.push(one);
    }
  }
  const zigzagTimestamp = timestampDelta >= 0 ? timestampDelta * 2 : -timestampDelta * 2 - 1;
  let body = 1 + sizeOfUVarLong(zigzagTimestamp) + sizeOfVarInt(offsetDelta);
  body += sizeOfVarIntBytes(key) + sizeOfVarIntBytes(value) + sizeOfVarInt(names.length);
  const nameBytes: number[] = new Array(names.length);
  const valueBytes: number[] = new Array(names.length);
  for (let i = 0; i < names.length; i++) {
    nameBytes[i] = utf8Length(names[i]);
    const v = values[i];
    valueBytes[i] = typeof v === 'string' ? utf8Length(v) : v.length;
    body += sizeOfVarInt(nameBytes[i]) + nameBytes[i] + sizeOfVarInt(valueBytes[i]) + valueBytes[i];
  }
  const total = sizeOfVarInt(body) + body;
  const buf = Buffer.allocUnsafe(total);
  let at = writeVarInt(buf, 0, body);
  buf[at++] = 0; // attributes: none
  at = writeUVarLong(buf, at, zigzagTimestamp);
  at = writeVarInt(buf, at, offsetDelta);
  at = writeVarIntBytes(buf, at, key);
  at = writeVarIntBytes(buf, at, value);
  at = writeVarInt(buf, at, names.length);
  for (let i = 0; i < names.length; i++) {
    at = writeVarInt(buf, at, nameBytes[i]);
    at = writeUtf8(buf, at, names[i], nameBytes[i]);
    at = writeVarInt(buf, at, valueBytes[i]);
    const v = values[i];
    at = typeof v === 'string' ? writeUtf8(buf, at, v, valueBytes[i]) : at + v.copy(buf, at);
  }
  if (at !== total) throw new Error(`record encoding wrote ${at} bytes of ${total}`);
  return { buf, offset: total, buffer: buf };
}

/** A key or value to write: null (absent), a string or a Buffer; false when kafkajs would write it otherwise. */
function bytesOf(v: unknown): string | Buffer | null | false {
  if (v === null || v === undefined) return null;
  return typeof v === 'string' || Buffer.isBuffer(v) ? v : false;
}

const zigzag = (value: number) => (value << 1) ^ (value >> 31);

function sizeOfVarInt(value: number): number {
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

/**
 * {@link encodeRecord} in the place of kafkajs's record encoder (kafkajs's own for what it does not take), unless
 * kafkajs's produce request, which holds the record encoder it loaded, has loaded already.
 */
function installRecordEncoder(): boolean {
  try {
    const requestPath = require.resolve('kafkajs/src/protocol/requests/produce/v3/request.js');
    const recordPath = require.resolve('kafkajs/src/protocol/recordBatch/record/v0/index.js');
    if (require.cache[requestPath]) return false;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const kafkajsRecord = require(recordPath) as (record: KafkajsRecord) => EncodedRecord;
    const fast = (record: KafkajsRecord) => encodeRecord(record) ?? kafkajsRecord(record);
    require.cache[recordPath]!.exports = fast;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(recordPath) === fast;
  } catch {
    return false;
  }
}

/** {@link crc32c} in the place of kafkajs's checksum module, unless its record batch encoder has loaded already. */
function installChecksum(): boolean {
  try {
    const encoderPath = require.resolve('kafkajs/src/protocol/recordBatch/v0/index.js');
    const checksumPath = require.resolve('kafkajs/src/protocol/recordBatch/crc32C/index.js');
    if (require.cache[encoderPath]) return false;
    const loaded = require.cache[checksumPath];
    if (loaded) {
      loaded.exports = crc32c;
    } else {
      const checksum = new Module(checksumPath);
      checksum.filename = checksumPath;
      checksum.loaded = true;
      checksum.exports = crc32c;
      require.cache[checksumPath] = checksum;
    }
    // What kafkajs's encoder will get (a module cache that ignores writes, as a test runner's may, would not give it).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(checksumPath) === crc32c;
  } catch {
    return false;
  }
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
  at = cursor;
  decoder.offset = at;
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

/**
 * {@link decodeRecord} in the place of kafkajs's record decoder (kafkajs's own for what it does not take), unless
 * kafkajs's record batch decoder, which holds the record decoder it loaded, has loaded already.
 */
function installRecordDecoder(): boolean {
  try {
    const batchPath = require.resolve('kafkajs/src/protocol/recordBatch/v0/decoder.js');
    const recordPath = require.resolve('kafkajs/src/protocol/recordBatch/record/v0/decoder.js');
    if (require.cache[batchPath]) return false;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const kafkajsDecoder = require(recordPath) as (d: KafkajsDecoder, c?: KafkajsBatchContext) => object;
    const fast = (d: KafkajsDecoder, c?: KafkajsBatchContext) => decodeRecord(d, c) ?? kafkajsDecoder(d, c);
    require.cache[recordPath]!.exports = fast;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(recordPath) === fast;
  } catch {
    return false;
  }
}
