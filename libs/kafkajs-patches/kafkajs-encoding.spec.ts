/* eslint-disable @typescript-eslint/no-require-imports */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import fc from 'fast-check';
import type { FastKafkajsEncoding } from './kafkajs-encoding';
import { murmur2 } from './kafkajs-murmur2';
import { encodeProduceRequest, groupMessagesPerPartition, type ProduceRequestArgs } from './kafkajs-produce-request';

/**
 * The faster kafkajs encoder methods write exactly the bytes kafkajs's own do: records (keys, values and headers of
 * any size, across the encoder's growth steps), record batches (with their CRC) and varints, encoded once by a
 * pristine copy of kafkajs's protocol modules and once by a copy with the faster methods installed.
 */
interface Encoded {
  buffer: Buffer;
}
interface Protocol {
  Record: (record: Record<string, unknown>) => Encoded;
  RecordBatch: (batch: Record<string, unknown>) => Promise<Encoded>;
  Encoder: {
    new (): Encoded & {
      writeVarInt(v: number): Encoded;
      writeUVarInt(v: number): Encoded;
      writeVarIntBytes(v: unknown): Encoded;
    };
    prototype: object;
  };
}
const load = (): Protocol => ({
  Record: require('kafkajs/src/protocol/recordBatch/record/v0'),
  RecordBatch: require('kafkajs/src/protocol/recordBatch/v0').RecordBatch,
  Encoder: require('kafkajs/src/protocol/encoder'),
});

let pristine!: Protocol;
let fast!: Protocol;
let installed: FastKafkajsEncoding | undefined;
let fastCrc!: (bytes: Uint8Array) => number;
let encodeRecord!: typeof import('./kafkajs-records').encodeRecord;
let decodeRecord!: typeof import('./kafkajs-records').decodeRecord;
type KafkajsDecoderClass = new (buffer: Buffer) => { buffer: Buffer; offset: number; readVarIntBytes(): Buffer };
let Decoder!: KafkajsDecoderClass;
let kafkajsDecodeRecord!: (decoder: object, batchContext: object) => object;
type ProduceRequest = (args: ProduceRequestArgs) => { apiVersion: number; encode(): Promise<Encoded> };
let kafkajsProduceV3!: ProduceRequest;
let kafkajsGroup!: typeof groupMessagesPerPartition;
let kafkajsMurmur2!: typeof murmur2;
let Long!: Parameters<typeof encodeProduceRequest>[1];
jest.isolateModules(() => {
  pristine = load();
  kafkajsProduceV3 = require('kafkajs/src/protocol/requests/produce/v3/request');
  kafkajsGroup = require('kafkajs/src/producer/groupMessagesPerPartition');
  kafkajsMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2');
  Long = require('kafkajs/src/utils/long');
  Decoder = require('kafkajs/src/protocol/decoder');
  kafkajsDecodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0/decoder');
});
jest.isolateModules(() => {
  const module = require('./kafkajs-encoding') as typeof import('./kafkajs-encoding');
  installed = module.installFastKafkajsEncoding();
  fastCrc = module.crc32c;
  const records = require('./kafkajs-records') as typeof import('./kafkajs-records');
  encodeRecord = records.encodeRecord;
  decodeRecord = records.decodeRecord;
  fast = load();
});

const text = fc.string({ unit: 'binary', maxLength: 40 });
const bytes = (maxLength: number) => fc.uint8Array({ maxLength }).map((b) => Buffer.from(b));
const recordKey = fc.oneof(text, bytes(64), fc.constant(null));
// Up to 5 KiB: past the encoder's first buffer (512 bytes) and several growth steps.
const recordValue = fc.oneof(bytes(5000), fc.string({ maxLength: 1500 }), fc.constant(null));
const recordHeaders = fc.dictionary(
  fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }),
  fc.oneof(text, bytes(300), fc.array(text, { maxLength: 3 })),
);
const record = fc.record({
  key: recordKey,
  value: recordValue,
  headers: recordHeaders,
  offsetDelta: fc.integer({ min: 0, max: 1 << 20 }),
  timestampDelta: fc.integer({ min: 0, max: 2 ** 40 }),
});

/** A produce request whose messages all have their timestamps (kafkajs's clock then changes no byte of it). */
const PRODUCE: ProduceRequestArgs = {
  acks: -1,
  timeout: 30000,
  topicData: [
    {
      topic: 'orders',
      partitions: [
        {
          partition: 0,
          messages: [{ key: 'k', value: 'v', headers: { ce_id: '1', ce_type: 't' }, timestamp: 1764547200000 }],
        },
        { partition: 2, messages: [{ key: null, value: 'w', headers: {}, timestamp: 1764547200001 }] },
      ],
    },
  ],
};

describe('faster kafkajs encoding (fast-check, fixed seeds)', () => {
  it('is installed on the pinned kafkajs, and replaces its methods', () => {
    expect(installed?.encoder).toBe(true);
    expect(Object.getOwnPropertyDescriptor(fast.Encoder.prototype, 'ensureAvailable')!.value).not.toBe(
      Object.getOwnPropertyDescriptor(pristine.Encoder.prototype, 'ensureAvailable')!.value,
    );
  });

  it('encodes every record to the bytes kafkajs does', () => {
    fc.assert(
      fc.property(record, (r) => {
        expect(fast.Record(r).buffer.equals(pristine.Record(r).buffer)).toBe(true);
      }),
      { seed: 90070, numRuns: 500 },
    );
  });

  it('writes each record in one buffer, to the bytes kafkajs does', () => {
    const anyRecord = fc.record({
      key: fc.oneof(text, bytes(64), fc.constant(null), fc.constant(undefined)),
      value: fc.oneof(bytes(5000), fc.string({ maxLength: 1500 }), fc.constant(null)),
      headers: fc.dictionary(
        fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }),
        fc.oneof(text, bytes(300), fc.array(fc.oneof(text, bytes(20)), { maxLength: 3 })),
      ),
      offsetDelta: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      // Either side of zero, and past 32 bits (a varlong).
      timestampDelta: fc.oneof(
        fc.integer({ min: -1000, max: 1000 }),
        fc.integer(),
        fc.constantFrom(2 ** 31, 2 ** 32, 2 ** 35 + 7, 2 ** 49 + 123, 2 ** 52 - 1).chain((n) => fc.constantFrom(n, -n)),
      ),
    });
    fc.assert(
      fc.property(anyRecord, (r) => {
        const ours = encodeRecord(r)!;
        expect(ours.buffer.equals(pristine.Record(r).buffer)).toBe(true);
        expect(ours.buf.length).toBe(ours.offset);
      }),
      { seed: 90075, numRuns: 1000 },
    );
    // What it leaves to kafkajs's own encoder: a Long or huge timestamp delta, a number as a value or header value.
    expect(encodeRecord({ value: 'v', timestampDelta: { low: 0, high: 0 } })).toBeUndefined();
    expect(encodeRecord({ value: 'v', timestampDelta: 2 ** 52 })).toBeUndefined();
    expect(encodeRecord({ value: 7 })).toBeUndefined();
    expect(encodeRecord({ value: 'v', headers: { n: 7 } })).toBeUndefined();
  });

  it('encodes record batches of its records, CRC included, to the bytes kafkajs does', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(record, { minLength: 1, maxLength: 12 }), async (records) => {
        const batch = (p: Protocol, encode: Protocol['Record']) =>
          p.RecordBatch({
            records: records.map((r, i) => encode({ ...r, offsetDelta: i })),
            firstTimestamp: 1764547200000,
            maxTimestamp: 1764547200000,
            lastOffsetDelta: records.length - 1,
          });
        const ours = await batch(fast, (r) => encodeRecord(r)!);
        expect(ours.buffer.equals((await batch(pristine, pristine.Record)).buffer)).toBe(true);
      }),
      { seed: 90076, numRuns: 100 },
    );
  });

  it('reads every record into the object kafkajs does, and stops where it does', () => {
    const decimal = (min: bigint, max: bigint) => fc.bigInt({ min, max }).map(String);
    const context = fc.record({
      // Mostly safe integers, some past 2^53 (kafkajs's own decoder takes those).
      firstOffset: fc.oneof(decimal(0n, 2n ** 40n), decimal(2n ** 53n - 5n, 2n ** 63n - 1n)),
      firstTimestamp: fc.oneof(decimal(-1n, 2n ** 45n), decimal(2n ** 53n, 2n ** 60n)),
      maxTimestamp: decimal(0n, 2n ** 45n),
      timestampType: fc.constantFrom(0, 1),
      isControlBatch: fc.boolean(),
      magicByte: fc.constant(2),
    });
    const duplicated = fc.array(fc.tuple(fc.constantFrom('ce_id', 'x', 'constructor', '__proto__'), text), {
      maxLength: 4,
    });
    let read = 0;
    fc.assert(
      fc.property(
        record,
        context,
        duplicated,
        fc.integer({ min: -(2 ** 40), max: 2 ** 40 }),
        (r0, ctx, extra, delta) => {
          // Timestamp deltas either side of zero (a record older than its batch's first).
          const r = { ...r0, timestampDelta: delta };
          const headers: Record<string, unknown> = { ...r.headers };
          // Names given twice (kafkajs makes an array of their values), inherited names, and `__proto__`.
          for (const [name, value] of extra) {
            const prior = Object.prototype.hasOwnProperty.call(headers, name) ? headers[name] : undefined;
            Object.defineProperty(headers, name, {
              value: prior === undefined ? [value] : ([] as unknown[]).concat(prior, value),
              enumerable: true,
              writable: true,
              configurable: true,
            });
          }
          const body = new Decoder(pristine.Record({ ...r, headers }).buffer).readVarIntBytes();
          const theirs = new Decoder(body);
          const expected = kafkajsDecodeRecord(theirs, ctx);
          const ours = new Decoder(body);
          const got = decodeRecord(ours, ctx);
          if (got === undefined) {
            // Left to kafkajs: where it could not be read the same way, and nothing consumed.
            expect(ours.offset).toBe(0);
            const unsafe = [
              ctx.firstOffset,
              ctx.firstTimestamp,
              Number(ctx.firstOffset) + r.offsetDelta,
              Number(ctx.firstTimestamp) + r.timestampDelta,
            ].some((n) => !Number.isSafeInteger(Number(n)));
            expect(unsafe || extra.some(([name]) => name === '__proto__') || r.timestampDelta >= 2 ** 48).toBe(true);
            return;
          }
          read++;
          expect(got).toEqual(expected);
          expect(Object.keys((got as { headers: object }).headers)).toEqual(
            Object.keys((expected as { headers: object }).headers),
          );
          expect(ours.offset).toBe(theirs.offset);
        },
      ),
      { seed: 90077, numRuns: 1000 },
    );
    // A good share of the records are read here (the generator leaves the rest to kafkajs on purpose).
    expect(read).toBeGreaterThan(150);
  });

  it('encodes record batches, CRC included, to the bytes kafkajs does', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(record, { minLength: 1, maxLength: 12 }), async (records) => {
        const batch = (p: Protocol) =>
          p.RecordBatch({
            records: records.map((r, i) => p.Record({ ...r, offsetDelta: i })),
            firstTimestamp: 1764547200000,
            maxTimestamp: 1764547200000,
            lastOffsetDelta: records.length - 1,
          });
        expect((await batch(fast)).buffer.equals((await batch(pristine)).buffer)).toBe(true);
      }),
      { seed: 90071, numRuns: 100 },
    );
  });

  /** A produce request as kafkajs's producer builds one: topics, their partitions, each partition's messages. */
  const produceRequest = fc.record({
    acks: fc.constantFrom(-1, 0, 1),
    timeout: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
    transactionalId: fc.oneof(fc.constant(undefined), fc.constant(null), text),
    producerId: fc.oneof(
      fc.constant(undefined),
      fc.integer({ min: -1, max: 2 ** 31 }),
      fc.constant('9007199254740993'),
    ),
    producerEpoch: fc.oneof(fc.constant(undefined), fc.integer({ min: 0, max: 32767 })),
    topicData: fc.array(
      fc.record({
        topic: fc.string({ minLength: 1, maxLength: 30 }),
        partitions: fc.array(
          fc.record({
            partition: fc.integer({ min: 0, max: 1000 }),
            firstSequence: fc.oneof(fc.constant(undefined), fc.integer({ min: 0, max: 2 ** 31 - 1 })),
            messages: fc.array(
              fc.record({
                key: recordKey,
                value: recordValue,
                headers: recordHeaders,
                // Absent, or numbers of several lengths: kafkajs sorts them as strings.
                timestamp: fc.oneof(
                  fc.constant(undefined),
                  fc.constant(null),
                  fc.integer({ min: 1, max: 99999 }),
                  fc.integer({ min: 1764547200000, max: 1764547300000 }),
                ),
              }),
              { maxLength: 8 },
            ),
          }),
          { minLength: 1, maxLength: 3 },
        ),
      }),
      { minLength: 1, maxLength: 3 },
    ),
  });

  it('writes each produce request in one buffer, to the bytes kafkajs does', async () => {
    const now = jest.spyOn(Date, 'now').mockReturnValue(1764547250000);
    try {
      await fc.assert(
        fc.asyncProperty(produceRequest, async (args) => {
          const ours = encodeProduceRequest(args as ProduceRequestArgs, Long, Date.now)!;
          expect(ours.buf.length).toBe(ours.offset);
          const kafkajs = (await kafkajsProduceV3(args as ProduceRequestArgs).encode()).buffer;
          expect(ours.buffer.equals(kafkajs)).toBe(true);
        }),
        { seed: 90077, numRuns: 200 },
      );
    } finally {
      now.mockRestore();
    }
  });

  it('leaves kafkajs the produce requests it does not write the way kafkajs does', () => {
    const messages = [{ key: 'k', value: 'v', headers: { ce_id: '1' } }];
    const args = (over: object, message = {}) =>
      ({
        acks: -1,
        timeout: 1000,
        topicData: [{ topic: 't', partitions: [{ partition: 0, messages: [{ ...messages[0], ...message }] }] }],
        ...over,
      }) as ProduceRequestArgs;
    expect(encodeProduceRequest(args({}), Long)).toBeDefined();
    expect(encodeProduceRequest(args({ compression: 1 }), Long)).toBeUndefined();
    expect(encodeProduceRequest(args({}, { value: 42 }), Long)).toBeUndefined();
    expect(encodeProduceRequest(args({}, { headers: { a: 1 } }), Long)).toBeUndefined();
    expect(encodeProduceRequest(args({}, { timestamp: '1764547200000' }), Long)).toBeUndefined();
  });

  it("hashes every key to kafkajs's murmur2, so a keyed event goes to the partition it did", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'grapheme', maxLength: 80 }), bytes(80), fc.integer()), (key) =>
        expect(murmur2(key)).toBe(kafkajsMurmur2(key)),
      ),
      { seed: 90079, numRuns: 2000 },
    );
    // Every length's tail (0 to 3 bytes past a multiple of 4), with high bytes.
    for (let n = 0; n <= 12; n++) {
      const key = Buffer.alloc(n, 0xff - n);
      expect(murmur2(key)).toBe(kafkajsMurmur2(key));
    }
  });

  it('groups messages by partition into the object kafkajs does', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 7 }), { maxLength: 60 }), fc.boolean(), (partitions, known) => {
        const args = {
          topic: 't',
          partitionMetadata: known ? [{ partitionId: 0 }] : [],
          messages: partitions.map((partition, i) => ({ partition, i })),
          partitioner: ({ message }: { message: { partition: number } }) => message.partition,
        };
        const ours = groupMessagesPerPartition(args);
        expect(ours).toEqual(kafkajsGroup(args));
        expect(Object.keys(ours)).toEqual(Object.keys(kafkajsGroup(args)));
      }),
      { seed: 90078, numRuns: 200 },
    );
  });

  /**
   * Jest's module registry ignores writes to require.cache, so the checksum's and the record encoder's installation
   * are tried in a plain Node
   * process, which loads this module's TypeScript through the compiler's transpileModule. `encoderFirst` loads
   * kafkajs's record batch encoder before the installation.
   */
  function inNode(encoderFirst: boolean): {
    installed: unknown;
    ours: boolean;
    recordOurs: boolean;
    batch: string;
    produce: string;
    produceOurs: boolean;
  } {
    const script = `
      const fs = require('node:fs');
      const ts = require('typescript');
      require.extensions['.ts'] = (m, file) => m._compile(ts.transpileModule(fs.readFileSync(file, 'utf8'), { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true } }).outputText, file);
      require(${JSON.stringify(path.join(__dirname, '../../test/support/libs-alias.ts'))});
      if (${encoderFirst}) require('kafkajs/src/protocol/recordBatch/v0');
      const kafkajsRecord = require('kafkajs/src/protocol/recordBatch/record/v0');
      const kafkajsRecordDecoder = require('kafkajs/src/protocol/recordBatch/record/v0/decoder');
      const kafkajsGroup = require('kafkajs/src/producer/groupMessagesPerPartition');
      const { installFastKafkajsEncoding, crc32c } = require(${JSON.stringify(path.join(__dirname, 'kafkajs-encoding.ts'))});
      const installed = installFastKafkajsEncoding();
      require('kafkajs');
      require('kafkajs/src/protocol/requests/produce/v3/request.js');
      const recordOurs = require('kafkajs/src/protocol/recordBatch/record/v0') !== kafkajsRecord &&
        require('kafkajs/src/protocol/recordBatch/record/v0/decoder') !== kafkajsRecordDecoder;
      const Record = require('kafkajs/src/protocol/recordBatch/record/v0');
      const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0');
      const produceOurs = require('kafkajs/src/producer/groupMessagesPerPartition') !== kafkajsGroup;
      const produceV6 = require('kafkajs/src/protocol/requests/produce/v6/request.js');
      Promise.all([
        RecordBatch({ records: [Record({ key: 'k', value: Buffer.alloc(1500, 118), headers: { ce_id: '1' } })], firstTimestamp: 1, maxTimestamp: 1 }),
        produceV6(${JSON.stringify(PRODUCE)}).encode(),
      ]).then(([batch, produce]) =>
        process.stdout.write('\\n' + JSON.stringify({ installed, recordOurs, produceOurs, ours: require('kafkajs/src/protocol/recordBatch/crc32C') === crc32c, batch: batch.buffer.toString('base64'), produce: produce.buffer.toString('base64') })));
    `;
    // The last line is the result (a warning may be logged before it).
    return JSON.parse(
      execFileSync(process.execPath, ['-e', script], {
        cwd: path.join(__dirname, '../..'),
        encoding: 'utf8',
        timeout: 30000,
      })
        .split('\n')
        .pop()!,
    );
  }
  /** Every part of kafkajs replaced, as a process that installs before loading kafkajs reports it. */
  const EVERY_PART: FastKafkajsEncoding = {
    encoder: true,
    crc32c: true,
    record: true,
    recordDecoder: true,
    produceRequest: true,
    groupByPartition: true,
    murmur2: true,
  };
  const kafkajsProduce = async () => (await kafkajsProduceV3(PRODUCE).encode()).buffer.toString('base64');
  const kafkajsBatch = async () =>
    (
      await pristine.RecordBatch({
        records: [pristine.Record({ key: 'k', value: Buffer.alloc(1500, 118), headers: { ce_id: '1' } })],
        firstTimestamp: 1,
        maxTimestamp: 1,
      })
    ).buffer.toString('base64');

  it("puts its CRC32C in the place of kafkajs's in a Node process, and kafkajs's record batches carry it", async () => {
    const out = inNode(false);
    expect(out.installed).toEqual(EVERY_PART);
    expect(out.ours).toBe(true);
    expect(out.recordOurs).toBe(true);
    expect(out.produceOurs).toBe(true);
    expect(out.batch).toBe(await kafkajsBatch());
    expect(out.produce).toBe(await kafkajsProduce());
  });

  it('leaves kafkajs its own checksum once its record batch encoder has loaded, and says so', async () => {
    const out = inNode(true);
    expect(out.installed).toEqual({ ...EVERY_PART, crc32c: false });
    expect(out.batch).toBe(await kafkajsBatch());
  });

  it('computes the CRC32C kafkajs does', () => {
    const kafkajsCrc = require('kafkajs/src/protocol/recordBatch/crc32C/crc32C') as (b: Buffer) => number;
    // The check value of CRC-32C (RFC 3720, appendix B.4).
    expect(fastCrc(Buffer.from('123456789'))).toBe(0xe3069283);
    fc.assert(
      // Lengths on every side of the 8-byte steps.
      fc.property(fc.uint8Array({ maxLength: 100 }), fc.integer({ min: 0, max: 7 }), (bytes, skip) => {
        const buffer = Buffer.from(bytes).subarray(Math.min(skip, bytes.length));
        expect(fastCrc(buffer)).toBe(kafkajsCrc(buffer));
      }),
      { seed: 90074, numRuns: 2000 },
    );
    const large = Buffer.from(Array.from({ length: 700_001 }, (_, i) => (i * 7919) & 0xff));
    expect(fastCrc(large)).toBe(kafkajsCrc(large));
  });

  it('writes every varint as kafkajs does', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
        fc.integer({ min: 0, max: 2 ** 32 - 1 }),
        (signed, unsigned) => {
          const encode = (p: Protocol) => {
            const e = new p.Encoder();
            e.writeVarInt(signed);
            e.writeUVarInt(unsigned);
            // A first write past the initial buffer grows it mid-varint.
            e.writeVarIntBytes(Buffer.alloc(509, 7));
            e.writeUVarInt(unsigned);
            return e.buffer;
          };
          expect(encode(fast).equals(encode(pristine))).toBe(true);
        },
      ),
      { seed: 90072, numRuns: 2000 },
    );
  });
});
