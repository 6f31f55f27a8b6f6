import { Kafka, logLevel } from 'kafkajs';
import { Pool } from 'undici';

/**
 * One member of a kafkajs consumer group, as its own process (so SIGKILL is a real crash: no LeaveGroup is
 * sent and the broker notices only after the session timeout). It POSTs every record to the benchmark's sink
 * with the record's `ce_id`, the same work a webhook delivery does, and prints its assignment on every join.
 * Started by bench/takeover.bench.ts with BENCH_GROUP_* settings.
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
  const kafka = new Kafka({ brokers: env('BENCH_GROUP_BROKERS').split(','), clientId: env('BENCH_GROUP_MEMBER'), logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({
    groupId: env('BENCH_GROUP_ID'),
    sessionTimeout,
    rebalanceTimeout: sessionTimeout,
    heartbeatInterval: Math.floor(sessionTimeout / 3),
  });
  const http = new Pool(sink.origin, { connections: 8 });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    process.stdout.write(`${JSON.stringify({ assigned: e.payload.memberAssignment[topic] ?? [] })}\n`);
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: process.env.BENCH_GROUP_FROM_BEGINNING === '1' });
  await consumer.run({
    partitionsConsumedConcurrently: 6,
    eachMessage: async ({ message }) => {
      const id = message.headers?.ce_id?.toString() ?? '';
      const response = await http.request({ method: 'POST', path: sink.pathname, headers: { 'ce-id': id }, body: message.value ?? '' });
      await response.body.dump();
      if (response.statusCode >= 300) throw new Error(`sink answered ${response.statusCode}`);
    },
  });
  process.stdout.write('running\n');
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as Error).message}\n`);
  process.exit(1);
});
