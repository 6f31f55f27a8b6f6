/**
 * The runtime's replacements for parts of kafkajs's internals (its pinned release only): encoders and decoders that
 * write and read the same bytes at a fraction of the CPU, and its request queue's fix. Process-wide: an entry point
 * installs them before anything loads kafkajs (apps/instance/src/kafkajs-first.ts), as some of kafkajs's modules keep
 * what they required when they loaded; libs/kafka installs them again (idempotent) for any other process.
 */
export { installFastKafkajsEncoding, isPinnedKafkajs, crc32c } from './kafkajs-encoding';
export type { FastKafkajsEncoding } from './kafkajs-encoding';
export { installIdleRequestQueueFix } from './kafkajs-request-queue';
