import { createHmac } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { Pool } from 'undici';
import { cloudEventsBinary, frameFromKafkaRecord } from '@libs/frame';

/**
 * One member of a kafkajs consumer group, as its own process (so SIGKILL is a real crash: no LeaveGroup is
 * sent and the broker notices only after the session timeout). It POSTs every record to the benchmark's sink the
 * way a webhook delivery does: CloudEvents HTTP binary mode (`ce-*` headers, the data as body) and, with
 * BENCH_GROUP_SIGNING_SECRET, the Standard Webhooks signature (HMAC-SHA256 of `id.timestamp.body`). It prints its
 * assignment on every join. `partitionsConsumedConcurrently` is BENCH_GROUP_CONCURRENCY (default 6, the
 * benchmarks' partitions). Started by bench/takeover.bench.ts and bench/delivery.bench.ts with BENCH_GROUP_* settings.
 */
async function main(): Promise<void> {
  const env = (name: string) => {
    const value = process.env[name];
    if (!value) throw new Error(`${name} is required`);
    return value;
  };
  const topic = env('BENCH_GROUP_TOPIC');
  const sink = new URL(env('BENCH_GROUP_SINK'));
  const sessionTimeout = Number(env('BENCH_GROUP_SESSION_TIMEOUT_MS'));
  const concurrency = Number(process.env.BENCH_GROUP_CONCURRENCY ?? 6);
  const secret = process.env.BENCH_GROUP_SIGNING_SECRET;
  const key = secret ? Buffer.from(secret.replace(/^whsec_/, ''), 'base64') : undefined;
  const kafka = new Kafka({
    brokers: env('BENCH_GROUP_BROKERS').split(','),
    clientId: env('BENCH_GROUP_MEMBER'),
    logLevel: logLevel.NOTHING,
  });
  const consumer = kafka.consumer({
    groupId: env('BENCH_GROUP_ID'),
    sessionTimeout,
    rebalanceTimeout: sessionTimeout,
    heartbeatInterval: Math.floor(sessionTimeout / 3),
  });
  const http = new Pool(sink.origin, { connections: Math.max(8, concurrency) });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    process.stdout.write(`${JSON.stringify({ assigned: e.payload.memberAssignment[topic] ?? [] })}\n`);
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: process.env.BENCH_GROUP_FROM_BEGINNING === '1' });
  await consumer.run({
    partitionsConsumedConcurrently: concurrency,
    eachMessage: async ({ partition, message }) => {
      const { headers, body } = cloudEventsBinary.encode(frameFromKafkaRecord(message.headers, message.value), 'http');
      if (key) {
        const id = `group:${topic}:${partition}:${message.offset}`;
        const timestamp = String(Math.floor(Date.now() / 1000));
        const hmac = createHmac('sha256', key).update(`${id}.${timestamp}.`);
        if (body) hmac.update(body);
        headers['webhook-id'] = id;
        headers['webhook-timestamp'] = timestamp;
        headers['webhook-signature'] = `v1,${hmac.digest('base64')}`;
      }
      const response = await http.request({ method: 'POST', path: sink.pathname, headers, body });
      await response.body.dump();
      if (response.statusCode >= 300) throw new Error(`sink answered ${response.statusCode}`);
    },
  });
  process.stdout.write('running\n');
}

// A clean exit on SIGTERM, so a `--cpu-prof` profile is written; SIGKILL stays a crash.
process.on('SIGTERM', () => process.exit(0));

main().catch((e: unknown) => {
  process.stderr.write(`${(e as Error).message}\n`);
  process.exit(1);
});
