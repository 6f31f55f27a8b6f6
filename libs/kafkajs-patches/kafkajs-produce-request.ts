import { crc32c, recordBodySize, sizeOfVarInt, writeRecord, type EncodedRecord } from './kafkajs-records';

/** kafkajs's `utils/long`: what its producer hands over as the producer id. */
interface KafkajsLongClass {
  fromValue(value: unknown): { getHighBits(): number; getLowBits(): number };
}

/** A message as kafkajs's producer hands it to its produce request (src/producer/sendMessages.js). */
interface ProduceMessage {
  key?: unknown;
  value?: unknown;
  headers?: Record<string, unknown>;
  timestamp?: unknown;
}

/** What kafkajs's produce request v3 (and v4-v7, which reuse it) is built from. */
export interface ProduceRequestArgs {
  acks: number;
  timeout: number;
  transactionalId?: string | null;
  producerId?: unknown;
  producerEpoch?: number;
  compression?: number;
  topicData: {
    topic: string;
    partitions: { partition: number; firstSequence?: number; messages: ProduceMessage[] }[];
  }[];
}

/** kafkajs's `CompressionTypes.None`, and the transactional bit of a record batch's attributes. */
const NO_COMPRESSION = 0;
const TRANSACTIONAL = 16;
/** A record batch's bytes before its records: base offset to the record count. */
const BATCH_HEADER = 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;
/** Where the checksummed part of a record batch starts (its attributes), from the batch's start. */
const CRC_FROM = 8 + 4 + 4 + 1 + 4;

/**
 * A produce request's body (v3, which kafkajs's v4-v7 reuse) in the bytes kafkajs's own encoder writes, written
 * in one buffer sized first. kafkajs spreads each message into a new object, encodes each record into a buffer of
 * its own, then copies the records into the batch, the batch into the partition, the partition into the topic and
 * the topic into the request: most of a publish's CPU in the instance after the HTTP request itself. Answers an
 * object kafkajs's `Encoder.writeEncoder` takes, or undefined for what this does not write the way kafkajs does
 * (compression, a message that is not all strings and Buffers, a timestamp that is not a number): kafkajs's own
 * encoder takes those requests whole.
 *
 * `now` stands for kafkajs's `Date.now()`, read once per partition as kafkajs does: the timestamp of messages
 * without their own.
 */
export function encodeProduceRequest(
  args: ProduceRequestArgs,
  Long: KafkajsLongClass,
  now: () => number = Date.now,
): EncodedRecord | undefined {
  if ((args.compression ?? NO_COMPRESSION) !== NO_COMPRESSION) return undefined;
  const transactionalId = args.transactionalId ?? null;
  const producerId = Long.fromValue(args.producerId ?? -1);
  const producerEpoch = args.producerEpoch ?? 0;

  // First pass: every record's size (kept for the second), every batch's timestamps, the request's size.
  const bodies: number[] = [];
  const deltas: number[] = [];
  const stamps: { first: number; max: number }[] = [];
  let size = stringSize(transactionalId) + 2 + 4 + 4;
  for (const topic of args.topicData) {
    size += stringSize(topic.topic) + 4;
    for (const part of topic.partitions) {
      const messages = part.messages;
      const dateNow = now();
      // As kafkajs: the timestamps given, sorted as its `.sort()` does (as strings), the first and the last.
      const given: number[] = [];
      for (const m of messages) {
        if (m.timestamp === null || m.timestamp === undefined) continue;
        if (typeof m.timestamp !== 'number' || !Number.isSafeInteger(m.timestamp)) return undefined;
        given.push(m.timestamp);
      }
      given.sort();
      const first = given.length === 0 ? dateNow : given[0];
      const max = given.length === 0 ? dateNow : given[given.length - 1];
      stamps.push({ first, max });
      size += 4 + 4 + BATCH_HEADER;
      for (let i = 0; i < messages.length; i++) {
        const m = messages[i];
        const delta = ((m.timestamp as number) || dateNow) - first;
        const body = recordBodySize(m.key, m.value, m.headers, i, delta);
        if (body < 0) return undefined;
        bodies.push(body);
        deltas.push(delta);
        size += sizeOfVarInt(body) + body;
      }
    }
  }

  const buf = Buffer.allocUnsafe(size);
  let at = writeString(buf, 0, transactionalId);
  at = buf.writeInt16BE(args.acks, at);
  at = buf.writeInt32BE(args.timeout, at);
  at = buf.writeInt32BE(args.topicData.length, at);
  let record = 0;
  let batch = 0;
  for (const topic of args.topicData) {
    at = writeString(buf, at, topic.topic);
    at = buf.writeInt32BE(topic.partitions.length, at);
    for (const part of topic.partitions) {
      const messages = part.messages;
      const { first, max } = stamps[batch++];
      at = buf.writeInt32BE(part.partition, at);
      const sizeAt = at;
      const start = at + 4;
      at = start;
      at = buf.writeBigInt64BE(0n, at); // base offset
      const lengthAt = at;
      at += 4;
      at = buf.writeInt32BE(0, at); // partition leader epoch
      at = buf.writeInt8(2, at); // magic
      const crcAt = at;
      at += 4;
      at = buf.writeInt16BE(transactionalId ? TRANSACTIONAL : 0, at);
      at = buf.writeInt32BE(messages.length - 1, at);
      at = writeInt64(buf, at, Long.fromValue(first));
      at = writeInt64(buf, at, Long.fromValue(max));
      at = writeInt64(buf, at, producerId);
      at = buf.writeInt16BE(producerEpoch, at);
      at = buf.writeInt32BE(part.firstSequence ?? 0, at);
      at = buf.writeInt32BE(messages.length, at);
      for (let i = 0; i < messages.length; i++, record++) {
        const m = messages[i];
        at = writeRecord(buf, at, bodies[record], m.key, m.value, m.headers, i, deltas[record]);
      }
      buf.writeInt32BE(at - start, sizeAt);
      buf.writeInt32BE(at - lengthAt - 4, lengthAt);
      buf.writeUInt32BE(crc32c(buf.subarray(start + CRC_FROM, at)), crcAt);
    }
  }
  if (at !== size) throw new Error(`produce request encoding wrote ${at} bytes of ${size}`);
  return { buf, offset: size, buffer: buf };
}

function stringSize(s: string | null): number {
  return s === null ? 2 : 2 + Buffer.byteLength(s, 'utf8');
}

/** kafkajs's `writeString`: an int16 length (-1 for null), then the UTF-8 bytes. */
function writeString(buf: Buffer, at: number, s: string | null): number {
  if (s === null) return buf.writeInt16BE(-1, at);
  const length = Buffer.byteLength(s, 'utf8');
  at = buf.writeInt16BE(length, at);
  return at + buf.write(s, at, length, 'utf8');
}

function writeInt64(buf: Buffer, at: number, long: { getHighBits(): number; getLowBits(): number }): number {
  at = buf.writeInt32BE(long.getHighBits(), at);
  return buf.writeInt32BE(long.getLowBits(), at);
}

/**
 * kafkajs's `producer/groupMessagesPerPartition`: a produce's messages as lists by partition (an object keyed by
 * partition, each list in the messages' order), the same object kafkajs's makes. Written as one pass: kafkajs's
 * copies the partition's list so far for every message, quadratic in the messages of a request.
 */
export function groupMessagesPerPartition<M>({
  topic,
  partitionMetadata,
  messages,
  partitioner,
}: {
  topic: string;
  partitionMetadata: unknown[];
  messages: M[];
  partitioner: (args: { topic: string; partitionMetadata: unknown[]; message: M }) => number;
}): Record<number, M[]> {
  const grouped: Record<number, M[]> = {};
  if (partitionMetadata.length === 0) return grouped;
  for (const message of messages) {
    const partition = partitioner({ topic, partitionMetadata, message });
    (grouped[partition] ??= []).push(message);
  }
  return grouped;
}
