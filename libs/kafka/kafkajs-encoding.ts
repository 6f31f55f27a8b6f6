import { createLogger } from '../logging';

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
let installed: boolean | undefined;

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
 * A record of 1 KiB with six `ce_*` headers cost 18 µs to encode, 11 µs with these (docs/benchmarks.md). What is
 * left is kafkajs's own: a zero-filled 512-byte `Buffer.alloc` in the constructor of each record and each header's
 * encoder, and CRC32C in JavaScript; neither can be reached without forking it.
 *
 * Applies only to the pinned kafkajs release, whose methods this module mirrors (a property test compares the
 * bytes with kafkajs's own encoder); with any other release it leaves kafkajs as it is and logs a warning.
 * Idempotent; returns whether the faster methods are in place. The methods are shared by every kafkajs client
 * of the process (they change no byte on the wire).
 */
export function installFastKafkajsEncoding(): boolean {
  if (installed !== undefined) return installed;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const version = (require('kafkajs/package.json') as { version: string }).version;
  if (version !== KAFKAJS_VERSION) {
    createLogger('kafka').warn({ version, expected: KAFKAJS_VERSION }, 'kafkajs is not the release the faster record encoding was written for; it is left as it is');
    installed = false;
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
  installed = true;
  return installed;
}
