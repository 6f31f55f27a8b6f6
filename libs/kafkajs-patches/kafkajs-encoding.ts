import { createLogger } from '@libs/logging';
import { murmur2 } from './kafkajs-murmur2';
import { encodeProduceRequest, groupMessagesPerPartition, type ProduceRequestArgs } from './kafkajs-produce-request';
import {
  crc32c,
  decodeRecord,
  encodeRecord,
  type EncodedRecord,
  type KafkajsBatchContext,
  type KafkajsDecoder,
  type KafkajsRecord,
} from './kafkajs-records';

export { crc32c };

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

export interface FastKafkajsEncoding {
  /** The encoder's growth and varints. */
  encoder: boolean;
  /** The record batch checksum. */
  crc32c: boolean;
  /** Each record written in one buffer ({@link encodeRecord}). */
  record: boolean;
  /** Each fetched record read without kafkajs's Long arithmetic and header copies ({@link decodeRecord}). */
  recordDecoder: boolean;
  /** Each produce request written in one buffer ({@link encodeProduceRequest}). */
  produceRequest: boolean;
  /** A produce's messages grouped by partition in one pass (kafkajs copies each partition's list for every message). */
  groupByPartition: boolean;
  /** The default partitioner's murmur2 in 32-bit arithmetic ({@link murmur2}). */
  murmur2: boolean;
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
  if (!isPinnedKafkajs('the faster record encoding')) {
    installed = { encoder: false } as FastKafkajsEncoding;
    for (const r of MODULE_REPLACEMENTS) installed[r.part] = false;
    return installed;
  }
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
  installed = { encoder: true } as FastKafkajsEncoding;
  // In this order: kafkajs's own produce request, kept for what the faster one leaves to it, loads the record encoder.
  for (const r of MODULE_REPLACEMENTS) {
    installed[r.part] = replaceKafkajsModule(r.holders, r.module, r.replace);
    if (!installed[r.part]) createLogger('kafka').warn(`kafkajs keeps its own ${r.what}: ${r.kept}`);
  }
  return installed;
}

/**
 * Puts `replace(kafkajs's module)` in the place of kafkajs's module `modulePath` in Node's module cache, unless
 * `holderPath` (the kafkajs module that requires it once, when it loads) has loaded already: it would keep what it
 * has. Answers whether kafkajs will get the replacement (a module cache that ignores writes, as a test runner's may,
 * would not give it).
 */
function replaceKafkajsModule(
  holderPaths: string[],
  modulePath: string,
  replace: (kafkajs: unknown) => unknown,
): boolean {
  try {
    const holders = holderPaths.map((h) => require.resolve(h));
    const path = require.resolve(modulePath);
    if (holders.some((holder) => require.cache[holder])) return false;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const replacement = replace(require(path));
    require.cache[path]!.exports = replacement;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(path) === replacement;
  } catch {
    return false;
  }
}

/**
 * The kafkajs modules replaced, each in Node's module cache unless one of its `holders` (the kafkajs modules that
 * require it once, when they load) has loaded already and keeps kafkajs's own.
 */
const MODULE_REPLACEMENTS: {
  part: Exclude<keyof FastKafkajsEncoding, 'encoder'>;
  holders: string[];
  module: string;
  replace: (kafkajs: unknown) => unknown;
  /** What kafkajs keeps when the replacement cannot go in, and why. */
  what: string;
  kept: string;
}[] = [
  {
    part: 'crc32c',
    holders: ['kafkajs/src/protocol/recordBatch/v0/index.js'],
    module: 'kafkajs/src/protocol/recordBatch/crc32C/index.js',
    replace: () => crc32c,
    what: 'CRC32C',
    kept: 'its record batch encoder had loaded it already',
  },
  {
    // Its own for what encodeRecord leaves to it.
    part: 'record',
    holders: ['kafkajs/src/protocol/requests/produce/v3/request.js'],
    module: 'kafkajs/src/protocol/recordBatch/record/v0/index.js',
    replace: (kafkajs) => {
      const own = kafkajs as (record: KafkajsRecord) => EncodedRecord;
      return (record: KafkajsRecord) => encodeRecord(record) ?? own(record);
    },
    what: 'record encoder',
    kept: 'its produce request had loaded it already',
  },
  {
    part: 'recordDecoder',
    holders: ['kafkajs/src/protocol/recordBatch/v0/decoder.js'],
    module: 'kafkajs/src/protocol/recordBatch/record/v0/decoder.js',
    replace: (kafkajs) => {
      const own = kafkajs as (d: KafkajsDecoder, c?: KafkajsBatchContext) => object;
      return (d: KafkajsDecoder, c?: KafkajsBatchContext) => decodeRecord(d, c) ?? own(d, c);
    },
    what: 'record decoder',
    kept: 'its record batch decoder had loaded it already',
  },
  {
    // v4 and v5 require v3, v6 and v7 those.
    part: 'produceRequest',
    holders: [
      'kafkajs/src/protocol/requests/produce/v4/request.js',
      'kafkajs/src/protocol/requests/produce/v5/request.js',
    ],
    module: 'kafkajs/src/protocol/requests/produce/v3/request.js',
    replace: (kafkajs) => {
      const own = kafkajs as (args: ProduceRequestArgs) => { encode(): Promise<unknown> };
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const Long = require('kafkajs/src/utils/long') as Parameters<typeof encodeProduceRequest>[1];
      return (args: ProduceRequestArgs) => {
        const request = own(args);
        const kafkajsEncode = request.encode;
        request.encode = async () => encodeProduceRequest(args, Long) ?? kafkajsEncode();
        return request;
      };
    },
    what: 'produce request encoder',
    kept: 'its later versions had loaded it already',
  },
  {
    part: 'groupByPartition',
    holders: ['kafkajs/src/producer/sendMessages.js'],
    module: 'kafkajs/src/producer/groupMessagesPerPartition.js',
    replace: () => groupMessagesPerPartition,
    what: 'grouping of messages',
    kept: 'its producer had loaded it already',
  },
  {
    part: 'murmur2',
    holders: ['kafkajs/src/producer/partitioners/default/index.js'],
    module: 'kafkajs/src/producer/partitioners/default/murmur2.js',
    replace: () => murmur2,
    what: 'murmur2',
    kept: 'its default partitioner had loaded it already',
  },
];
