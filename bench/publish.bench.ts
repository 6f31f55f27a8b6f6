import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Kafka, logLevel, Message, Partitioners, Producer } from 'kafkajs';
import { createTopicsAndWait } from '@libs/kafka';
import { Pool } from 'undici';
import { EventMeshClient } from '@eventmesh/client';
import { frameToKafkaMessage } from '@libs/frame';
import { gatedGateway } from './gated-gateway';
import { overloadDescription, overloadGateway, OverloadRound, quotaGateways, QuotaRound } from './publish-limits';
import {
  benchConfig,
  benchEnv,
  brokerPid,
  median as medianOf,
  meterCpu,
  printTable,
  RunResult,
  startInstanceProcess,
  summarize,
} from './support';

/**
 * Publish throughput and latency: HTTP `POST /events/publish` through a real instance process against two raw
 * kafkajs baselines on the same broker, in the same run:
 *   (a) one `send()` per event at the same concurrency (what a user without the runtime would write),
 *   (b) `sendBatch` of 500 events at a time (close to what the client and broker can do).
 * The runtime is measured per event (one structured-mode event per request) and in the batch content mode
 * (`application/cloudevents-batch+json`, 500 events per request, BENCH_BATCH_CONCURRENCY requests at once,
 * default 4: the producer's produce requests in flight), the latter against (b).
 * The runtime is measured with the request gate open and with it on (an ES256 JWT per request, an ACL rule
 * evaluated, the tenant's quota set high enough not to bite, fail-closed), auditing every decision to the log or
 * refusals only.
 * 1 KiB events, 64 concurrent clients, acks from all in-sync replicas. `npm run bench:publish`
 * (BENCH_EVENTS, BENCH_CONCURRENCY, BENCH_ROUNDS to change the size). The paths take turns for BENCH_ROUNDS rounds
 * (default 3); the figures are each path's median round. BENCH_PATHS picks paths by key (comma-separated; default
 * all): `http1`, `gated-all`, `gated-denials`, `traced`, `metrics-off`, `http2`, `send`, `batch`, `http-batch`, `sdk`
 * (`@eventmesh/client`'s `publish`, BENCH_CONCURRENCY callers, against `http1`), `sdk-batch` (`publishMany` of
 * every event, batched by the SDK into requests of up to 500 with BENCH_BATCH_CONCURRENCY x 500 events in flight,
 * against `http-batch`), `overload` and `quota` (below).
 * `traced` is the open gateway with tracing on and no exporter (EVENTMESH_TRACING_ENABLED=true, no OTLP endpoint:
 * a publish span context per request, not recorded), the same requests as `http1`, against which it is compared.
 * `metrics-off` is the `http1` gateway with EVENTMESH_METRICS_ENABLED=false (the others record metrics, the default),
 * measured back to back with `http1` in each round: the cost of metrics (goal: at most 5% of throughput).
 * Two paths measure the publish path's limits, not its throughput (bench/publish-limits.ts): `overload`, how long a
 * publish past the producer's cap takes to be refused 503 OVERLOADED while Kafka is cut off (percentiles of every
 * round); `quota`, how many events a tenant's quota admits through two gateways against rate x time + burst (the
 * ratio of every round, and the bound the filter promises).
 */
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WARMUP = Math.min(2000, Math.floor(EVENTS / 5));
const DATA = 'x'.repeat(1024);
const BATCH = 500;
const BATCH_CONCURRENCY = Number(process.env.BENCH_BATCH_CONCURRENCY ?? 4);
const PATHS = [
  'http1',
  'http2',
  'send',
  'batch',
  'gated-all',
  'gated-denials',
  'http-batch',
  'traced',
  'metrics-off',
  'sdk',
  'sdk-batch',
  'overload',
  'quota',
] as const;
type PathKey = (typeof PATHS)[number];
const SELECTED = new Set<string>(
  process.env.BENCH_PATHS ? process.env.BENCH_PATHS.split(',').map((p) => p.trim()) : PATHS,
);
for (const p of SELECTED)
  if (!(PATHS as readonly string[]).includes(p))
    throw new Error(`BENCH_PATHS: unknown path "${p}"; legal: ${PATHS.join(', ')}`);
const selected = (p: PathKey) => SELECTED.has(p);

function event(n: number) {
  return {
    specversion: '1.0',
    id: randomUUID(),
    source: '/bench',
    type: 'bench.published',
    partitionkey: `k${n % 97}`,
    data: DATA,
  };
}

async function pool(total: number, concurrency: number, task: (n: number) => Promise<void>): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const n = next++;
        const t0 = process.hrtime.bigint();
        await task(n);
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }),
  );
  return latencies;
}

async function viaHttp(
  name: string,
  url: string,
  gatewayPid: number | undefined,
  topic: string,
  total: number,
  authorization?: string,
): Promise<RunResult> {
  // undici's pool: keep-alive connections, one per concurrent client, and little client-side CPU per request.
  const client = new Pool(url, { connections: CONCURRENCY, pipelining: 1 });
  const path = `/events/publish?topic=${topic}`;
  const post = async (body: string) => {
    const { statusCode, body: response } = await client.request({
      path,
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json', ...(authorization ? { authorization } : {}) },
      body,
    });
    await response.dump();
    if (statusCode !== 202) throw new Error(`HTTP ${statusCode}`);
  };
  await pool(WARMUP, CONCURRENCY, (n) => post(JSON.stringify(event(n))));
  const cpu = meterCpu({ client: 'self', gateway: gatewayPid, broker: brokerPid() });
  const started = process.hrtime.bigint();
  const latencies = await pool(total, CONCURRENCY, (n) => post(JSON.stringify(event(n))));
  const result = { ...summarize(name, total, started, latencies), cpu: cpu() };
  await client.close();
  return result;
}

/**
 * The batch content mode: requests of {@link BATCH} events, BENCH_BATCH_CONCURRENCY at once, each answered with
 * one result per event (checked: a result with an offset for every event sent).
 */
async function viaHttpBatch(
  name: string,
  url: string,
  gatewayPid: number | undefined,
  topic: string,
  total: number,
): Promise<RunResult> {
  const client = new Pool(url, { connections: BATCH_CONCURRENCY, pipelining: 1 });
  const path = `/events/publish?topic=${topic}`;
  const post = async (first: number, size: number) => {
    const body = JSON.stringify(Array.from({ length: size }, (_, i) => event(first + i)));
    const { statusCode, body: response } = await client.request({
      path,
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents-batch+json' },
      body,
    });
    const answer = (await response.json()) as { results?: { offset?: unknown }[] };
    if (statusCode !== 202) throw new Error(`HTTP ${statusCode}: ${JSON.stringify(answer)}`);
    if (answer.results?.length !== size || answer.results.some((r) => typeof r.offset !== 'number')) {
      throw new Error(`a batch of ${size} was answered with ${answer.results?.length ?? 'no'} results`);
    }
  };
  const batches = (events: number) => (n: number) => post(n * BATCH, Math.min(BATCH, events - n * BATCH));
  await pool(Math.ceil(WARMUP / BATCH), BATCH_CONCURRENCY, batches(WARMUP));
  const cpu = meterCpu({ client: 'self', gateway: gatewayPid, broker: brokerPid() });
  const started = process.hrtime.bigint();
  const latencies = await pool(Math.ceil(total / BATCH), BATCH_CONCURRENCY, batches(total));
  const result = { ...summarize(name, total, started, latencies), cpu: cpu() };
  await client.close();
  return result;
}

/**
 * The SDK: `each`, CONCURRENCY callers awaiting `publish` one event at a time (the SDK may put events of callers of
 * one tick into one request); `many`, one `publishMany` of every event, cut by the SDK into requests of up to
 * {@link BATCH}, BENCH_BATCH_CONCURRENCY requests' worth of events in flight.
 */
async function viaSdk(
  name: string,
  url: string,
  gatewayPid: number | undefined,
  topic: string,
  total: number,
  mode: 'each' | 'many',
): Promise<RunResult> {
  const inFlight = mode === 'each' ? CONCURRENCY : BATCH * BATCH_CONCURRENCY;
  const mesh = new EventMeshClient({
    url,
    topic,
    publish: { maxEventsInFlight: inFlight, maxBatchEvents: BATCH, maxBatchBytes: 1000 * 1000 },
  });
  const run = async (events: number): Promise<number[]> => {
    if (mode === 'each') return pool(events, CONCURRENCY, async (n) => void (await mesh.publish(event(n))));
    // One call, of a generator: each event is made when the SDK takes it, as the raw batch loop makes each request's
    // events when it sends it. Its latency is the whole call's.
    const t0 = process.hrtime.bigint();
    const results = await mesh.publishMany(
      (function* () {
        for (let n = 0; n < events; n++) yield event(n);
      })(),
    );
    if (results.length !== events || results.some((r) => typeof r.offset !== 'number'))
      throw new Error(`publishMany of ${events} resolved with ${results.length} results`);
    return [Number(process.hrtime.bigint() - t0) / 1e6];
  };
  await run(WARMUP);
  const cpu = meterCpu({ client: 'self', gateway: gatewayPid, broker: brokerPid() });
  const started = process.hrtime.bigint();
  const latencies = await run(total);
  return { ...summarize(name, total, started, latencies), cpu: cpu() };
}

function rawMessage(n: number): Message {
  const e = event(n);
  return frameToKafkaMessage({
    id: e.id,
    source: e.source,
    type: e.type,
    datacontenttype: 'application/json',
    extensions: { partitionkey: e.partitionkey },
    data: Buffer.from(JSON.stringify(e.data)),
  });
}

/** The run with the median throughput of each path's rounds. */
function median(runs: RunResult[]): RunResult {
  return [...runs].sort((x, y) => x.perSecond - y.perSecond)[Math.floor(runs.length / 2)];
}

async function main(): Promise<void> {
  const topic = `bench-publish-${randomUUID().slice(0, 8)}`;
  const config = benchConfig({ EVENTMESH_KAFKA_TOPICS: topic });
  const kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'bench', logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await createTopicsAndWait(admin, [{ topic, numPartitions: 6, replicationFactor: 1 }]);

  // The runtime twice: one gateway process, and one per core (EVENTMESH_HTTP_PROCESSES, a gateway-only instance).
  const gateway = (processes: number, extra: Record<string, string> = {}) =>
    startInstanceProcess(
      benchEnv({
        EVENTMESH_KAFKA_TOPICS: topic,
        EVENTMESH_INSTANCE_ROLES: 'gateway',
        EVENTMESH_HTTP_PORT: '0',
        EVENTMESH_HTTP_PROCESSES: String(processes),
        EVENTMESH_INSTANCE_ID: `bench-publish-${processes}`,
        ...extra,
      }),
    );
  const single = ['http1', 'http-batch', 'sdk', 'sdk-batch'].some((p) => SELECTED.has(p))
    ? await gateway(1)
    : undefined;
  const metricsOff = selected('metrics-off')
    ? await gateway(1, { EVENTMESH_METRICS_ENABLED: 'false', EVENTMESH_INSTANCE_ID: 'bench-publish-metrics-off' })
    : undefined;
  const multi = selected('http2') ? await gateway(os.cpus().length) : undefined;
  const gatedOf = (audit: 'ALL' | 'DENIALS') =>
    gatedGateway(topic, {
      instanceId: `bench-publish-gated-${audit.toLowerCase()}`,
      audit,
      tenant: 'bench',
      probe: JSON.stringify(event(0)),
    });
  const gated = selected('gated-all') ? await gatedOf('ALL') : undefined;
  const gatedDenials = selected('gated-denials') ? await gatedOf('DENIALS') : undefined;
  const body = (n: number) => JSON.stringify(event(n));
  const overload = selected('overload') ? await overloadGateway(topic, body) : undefined;
  const quota = selected('quota') ? await quotaGateways(topic, body) : undefined;
  const overloadRounds: OverloadRound[] = [];
  const quotaRounds: QuotaRound[] = [];
  // Tracing configured without an exporter: span contexts made and carried, spans not recorded (docs/operations.md#tracing).
  const traced = selected('traced')
    ? await gateway(1, {
        EVENTMESH_TRACING_ENABLED: 'true',
        EVENTMESH_TRACING_OTLP_ENDPOINT: '',
        EVENTMESH_INSTANCE_ID: 'bench-publish-traced',
      })
    : undefined;
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const rounds: RunResult[][] = PATHS.map(() => []);
  try {
    // The paths take turns, round after round, so a slow moment of the shared host hits them alike.
    for (let round = 0; round < ROUNDS; round++) {
      // The open path and the gated ones back to back, so they see the host alike; their order alternates from round
      // to round, so none is always the one that follows the previous round's Kafka writes.
      const gatePaths = [
        async () => {
          if (single && selected('http1'))
            rounds[0].push(
              await viaHttp('eventmesh HTTP publish, 1 gateway process', single.url, single.child.pid, topic, EVENTS),
            );
        },
        async () => {
          if (gated)
            rounds[4].push(
              await viaHttp(
                'eventmesh HTTP publish, gate on (JWT ES256, ACL, quota), every decision audited, 1 gateway process',
                gated.url,
                gated.child.pid,
                topic,
                EVENTS,
                gated.authorization,
              ),
            );
        },
        async () => {
          if (traced)
            rounds[7].push(
              await viaHttp(
                'eventmesh HTTP publish, tracing on without an exporter, 1 gateway process',
                traced.url,
                traced.child.pid,
                topic,
                EVENTS,
              ),
            );
        },
        async () => {
          if (metricsOff)
            rounds[8].push(
              await viaHttp(
                'eventmesh HTTP publish, metrics off, 1 gateway process',
                metricsOff.url,
                metricsOff.child.pid,
                topic,
                EVENTS,
              ),
            );
        },
        async () => {
          if (gatedDenials)
            rounds[5].push(
              await viaHttp(
                'eventmesh HTTP publish, gate on (JWT ES256, ACL, quota), refusals audited, 1 gateway process',
                gatedDenials.url,
                gatedDenials.child.pid,
                topic,
                EVENTS,
                gatedDenials.authorization,
              ),
            );
        },
      ];
      for (const path of round % 2 === 0 ? gatePaths : [...gatePaths].reverse()) await path();
      if (multi)
        rounds[1].push(
          await viaHttp(
            `eventmesh HTTP publish, ${os.cpus().length} gateway processes`,
            multi.url,
            multi.child.pid,
            topic,
            EVENTS,
          ),
        );
      if (selected('send')) rounds[2].push(await perEventSends(producer, topic));
      if (selected('batch')) rounds[3].push(await batchSends(producer, topic));
      // Right after (b), its baseline.
      if (single && selected('http-batch'))
        rounds[6].push(
          await viaHttpBatch(
            `eventmesh HTTP batch mode (${BATCH} events a request, ${BATCH_CONCURRENCY} at once), 1 gateway process`,
            single.url,
            single.child.pid,
            topic,
            EVENTS,
          ),
        );
      // The SDK's paths right after the raw ones they are held to.
      if (single && selected('sdk'))
        rounds[9].push(
          await viaSdk(
            `@eventmesh/client publish, ${CONCURRENCY} callers, 1 gateway process`,
            single.url,
            single.child.pid,
            topic,
            EVENTS,
            'each',
          ),
        );
      if (single && selected('sdk-batch'))
        rounds[10].push(
          await viaSdk(
            `@eventmesh/client publishMany (batched by the SDK), 1 gateway process`,
            single.url,
            single.child.pid,
            topic,
            EVENTS,
            'many',
          ),
        );
      if (overload) overloadRounds.push(await overload.round());
      if (quota) quotaRounds.push(await quota.round());
    }
  } finally {
    await overload?.stop();
    await quota?.stop();
    await single?.stop();
    await metricsOff?.stop();
    await multi?.stop();
    await gated?.stop();
    await gatedDenials?.stop();
    await traced?.stop();
    await producer.disconnect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  }

  console.log(
    `\npublish benchmark: ${EVENTS} events of 1 KiB per path and round, ${ROUNDS} rounds, ${CONCURRENCY} concurrent clients, acks=-1, topic of 6 partitions`,
  );
  console.log(
    `machine: ${os.cpus().length} cores (${os.cpus()[0].model}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; everything on one host\n`,
  );
  const medians = rounds.map((runs) => (runs.length > 0 ? median(runs) : undefined));
  const measured = (i: number) => rounds[i].length > 0;
  if (medians.some((r) => r !== undefined)) {
    console.log('The round with the median throughput of each path:\n');
    printTable(medians.filter((r): r is RunResult => r !== undefined));
    console.log('\nevents/s of every round:');
    for (const runs of rounds)
      if (runs.length > 0) console.log(`- ${runs[0].name}: ${runs.map((r) => Math.round(r.perSecond)).join(', ')}`);
  }
  // Each round's paths ran back to back on the same host: the median of the per-round ratios is the steadier
  // figure when the host's speed drifts from round to round.
  const ratio = (ours: number, base: number) => {
    const perRound = rounds[ours].map((r, i) => r.perSecond / rounds[base][i].perSecond);
    const mid = [...perRound].sort((x, y) => x - y)[Math.floor(perRound.length / 2)];
    return `${(medians[ours]!.perSecond / medians[base]!.perSecond).toFixed(2)}x of the medians, ${mid.toFixed(2)}x the median round; per round ${perRound.map((x) => x.toFixed(2)).join(', ')}`;
  };
  for (const ours of [0, 1, 4]) {
    if (!measured(ours) || (!measured(2) && !measured(3))) continue;
    console.log(`\n${medians[ours]!.name}:`);
    if (measured(2)) console.log(`- vs (a) per-event send: ${ratio(ours, 2)} (goal >= 1.0x)`);
    if (measured(3)) console.log(`- vs (b) batches of 500: ${ratio(ours, 3)} (goal >= 0.5x)`);
  }
  if (measured(6) && measured(3)) {
    console.log(`\n${medians[6]!.name}:`);
    console.log(`- vs (b) batches of 500: ${ratio(6, 3)} (goal >= 0.8x)`);
  }
  if (measured(9) && measured(0))
    console.log(
      `\n${medians[9]!.name}:\n- vs the raw HTTP client at the same concurrency: ${ratio(9, 0)} (goal >= 0.95x)`,
    );
  if (measured(10) && measured(6))
    console.log(`\n${medians[10]!.name}:\n- vs the raw batch mode: ${ratio(10, 6)} (goal >= 0.9x)`);
  const gatewayCpu = (r: RunResult) => (r.cpu?.gateway ?? NaN) / r.events;
  if (measured(7) && measured(0)) {
    console.log(`\n${medians[7]!.name}:`);
    console.log(`- vs the same gateway with tracing off: ${ratio(7, 0)} (goal >= 0.95x)`);
    const cpuRatio = rounds[0].map((r, i) => gatewayCpu(r) / gatewayCpu(rounds[7][i]));
    console.log(`- gateway CPU per event, off / on: per round ${cpuRatio.map((x) => x.toFixed(2)).join(', ')}`);
  }
  if (measured(8) && measured(0)) {
    console.log(`\n${medians[0]!.name} (metrics on):`);
    console.log(`- vs the same gateway with metrics off: ${ratio(0, 8)} (goal >= 0.95x)`);
    const cpuRatio = rounds[0].map((r, i) => gatewayCpu(rounds[8][i]) / gatewayCpu(r));
    console.log(`- gateway CPU per event, off / on: per round ${cpuRatio.map((x) => x.toFixed(2)).join(', ')}`);
  }
  for (const gatedPath of [4, 5]) {
    if (!measured(gatedPath) || !measured(0)) continue;
    console.log(`\n${medians[gatedPath]!.name}:`);
    console.log(`- vs the same gateway with the gate open: ${ratio(gatedPath, 0)} (goal >= 0.9x)`);
    const cpuRatio = rounds[0].map((r, i) => gatewayCpu(r) / gatewayCpu(rounds[gatedPath][i]));
    console.log(
      `- gateway CPU per event, open / gated (the throughput a CPU-bound gateway keeps): per round ${cpuRatio.map((x) => x.toFixed(2)).join(', ')}`,
    );
  }
  printLimits(overloadRounds, quotaRounds, quota?.description);
}

/** The `overload` and `quota` figures: every round, and the median round's. */
function printLimits(overload: OverloadRound[], quota: QuotaRound[], quotaDescription?: string): void {
  const ms = (x: number) => x.toFixed(1);
  if (overload.length > 0) {
    console.log(`
OVERLOADED refusal latency (${overloadDescription}), ms:`);
    console.log(
      '| round | refused 503 OVERLOADED | p50 | p95 | p99 | max | other answers | held publishes answered meanwhile |',
    );
    console.log('|---|---|---|---|---|---|---|---|');
    overload.forEach((r, i) =>
      console.log(
        `| ${i + 1} | ${r.refusals} | ${ms(r.latencyMs.p50)} | ${ms(r.latencyMs.p95)} | ${ms(r.latencyMs.p99)} | ${ms(r.latencyMs.max)} | ${JSON.stringify(r.other)} | ${r.heldAnsweredEarly} |`,
      ),
    );
    const p99s = overload.map((r) => r.latencyMs.p99);
    console.log(
      `p50 median ${ms(medianOf(overload.map((r) => r.latencyMs.p50)))} ms; p99 median ${ms(medianOf(p99s))} ms`,
    );
  }
  if (quota.length > 0) {
    console.log(`
quota accuracy (${quotaDescription}):`);
    console.log(
      '| round | seconds | accepted | refused 429 | other | ideal (rate x s + burst) | accepted / ideal | bound | accepted / bound |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|');
    quota.forEach((r, i) =>
      console.log(
        `| ${i + 1} | ${r.seconds.toFixed(2)} | ${r.accepted} | ${r.refused} | ${r.other} | ${r.ideal.toFixed(0)} | ${(r.accepted / r.ideal).toFixed(3)} | ${r.bound.toFixed(0)} | ${(r.accepted / r.bound).toFixed(3)} |`,
      ),
    );
    // A round whose publishers were refused less than half as often as admitted did not hold the quota under load
    // (the host asked too slowly): its ratio measures the host, not the quota, so the median leaves it out.
    const loaded = quota.filter((r) => r.refused > 0.5 * r.accepted);
    const ratios = quota.map((r) => r.accepted / r.ideal);
    console.log(
      `accepted / ideal: median ${loaded.length > 0 ? medianOf(loaded.map((r) => r.accepted / r.ideal)).toFixed(3) : '-'} over the ${loaded.length} rounds loaded past the quota (refused > half the accepted); per round ${ratios.map((x) => x.toFixed(3)).join(', ')}; within the bound in ${quota.filter((r) => r.accepted <= r.bound).length} of ${quota.length} rounds`,
    );
  }
}

async function perEventSends(producer: Producer, topic: string): Promise<RunResult> {
  const send = async (n: number) => void (await producer.send({ topic, acks: -1, messages: [rawMessage(n)] }));
  await pool(WARMUP, CONCURRENCY, send);
  const cpu = meterCpu({ client: 'self', broker: brokerPid() });
  const started = process.hrtime.bigint();
  const latencies = await pool(EVENTS, CONCURRENCY, send);
  return { ...summarize('(a) kafkajs send() per event', EVENTS, started, latencies), cpu: cpu() };
}

async function batchSends(producer: Producer, topic: string): Promise<RunResult> {
  const cpu = meterCpu({ client: 'self', broker: brokerPid() });
  const started = process.hrtime.bigint();
  for (let sent = 0; sent < EVENTS; sent += 500) {
    const size = Math.min(500, EVENTS - sent);
    await producer.sendBatch({
      acks: -1,
      topicMessages: [{ topic, messages: Array.from({ length: size }, (_, i) => rawMessage(sent + i)) }],
    });
  }
  return { ...summarize('(b) kafkajs sendBatch of 500', EVENTS, started), cpu: cpu() };
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
