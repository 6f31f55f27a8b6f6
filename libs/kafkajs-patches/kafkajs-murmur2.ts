/** The mixing constants and seed of Kafka's murmur2 (the Java client's `Utils.murmur2`). */
const SEED = 0x9747b28c;
const M = 0x5bd1e995;

/**
 * Kafka's murmur2 of a record key, the hash kafkajs's `DefaultPartitioner` (Java compatible) picks a keyed record's
 * partition by: the same 32-bit result as kafkajs's `partitioners/default/murmur2`, computed in 32-bit integer
 * arithmetic (`Math.imul`). kafkajs computes it with its `Long`, a `BigInt` per step: 2-3 µs a published event's key
 * on this project's host. Only the low 32 bits of each of kafkajs's 64-bit steps reach its result (its shifts read
 * `toInt()`, and a product's low bits depend only on its factors' low bits), so the two agree on every key.
 */
export function murmur2(key: unknown): number {
  const data = Buffer.isBuffer(key) ? key : Buffer.from(String(key));
  const length = data.length;
  let h = (SEED ^ length) | 0;
  const length4 = length >>> 2;
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4;
    let k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  // The last one to three bytes, as the Java client's fall-through switch takes them.
  const tail = length & ~3;
  const rest = length % 4;
  if (rest > 0) {
    if (rest === 3) h ^= data[tail + 2] << 16;
    if (rest >= 2) h ^= data[tail + 1] << 8;
    h ^= data[tail];
    h = Math.imul(h, M);
  }
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}
