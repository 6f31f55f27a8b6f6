import { Pool } from 'undici';
import { FaultProxy } from '../test/faults/fault-proxy';
import { kafkaFaultListener } from '../test/support/env';
import { gatedGateway } from './gated-gateway';
import { benchEnv, percentile, startInstanceProcess, until } from './support';

/**
 * The figures of the publish path's limits, measured here rather than asserted in the tests (issue 29: a test on a
 * loaded host asserts the guarantee, the benchmark reports how long or how close):
 * - `overload`: how long a publish past the producer's cap takes to be refused (503 OVERLOADED) while Kafka is cut
 *   off and the producer holds its most events (test/integration/publish-backpressure.spec.ts asserts the refusal
 *   comes while every held publish is still held and unanswered);
 * - `quota`: how many events a tenant's quota admits through two gateways, against the ideal rate x time + burst
 *   and the filter's bound (test/integration/gate-acl-quota.spec.ts asserts the bound and a floor).
 */

/** The producer's cap of held events, and the publish timeout (long: the refusals all come inside it). */
const QUEUE_MAX_EVENTS = 200;
const PUBLISH_TIMEOUT_MS = 15000;
/** Publishes past the cap per round, and how many at once. */
const REFUSALS = Number(process.env.BENCH_OVERLOAD_REFUSALS ?? 500);
const REFUSAL_CONCURRENCY = 8;

/** One round of `overload`: the refusals' latencies, and what else was answered while they were asked. */
export interface OverloadRound {
  refusals: number;
  latencyMs: { p50: number; p95: number; p99: number; max: number };
  /** Answers other than 503 OVERLOADED among the publishes past the cap (none expected). */
  other: Record<string, number>;
  /** Held publishes answered before the last refusal came back (none expected: each waits for its timeout). */
  heldAnsweredEarly: number;
}

/**
 * A gateway-only instance whose producer reaches Kafka only through a proxy the benchmark cuts: it bootstraps at the
 * broker's fault listener's advertised address, where the proxy listens. `round` cuts the link, fills the producer
 * with {@link QUEUE_MAX_EVENTS} publishes, times {@link REFUSALS} more, then heals and waits for the held ones.
 */
export async function overloadGateway(topic: string, body: (n: number) => string) {
  const listener = kafkaFaultListener();
  const proxy = new FaultProxy(listener.host, listener.port, { listenPort: listener.advertisedPort });
  await proxy.start();
  const instance = await startInstanceProcess(
    benchEnv({
      EVENTMESH_KAFKA_BROKERS: `${listener.host}:${listener.advertisedPort}`,
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_INSTANCE_ROLES: 'gateway',
      EVENTMESH_HTTP_PORT: '0',
      EVENTMESH_INSTANCE_ID: 'bench-publish-overload',
      EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS: String(PUBLISH_TIMEOUT_MS),
      EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_EVENTS: String(QUEUE_MAX_EVENTS),
      EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS: '20',
      EVENTMESH_KAFKA_PRODUCE_MAX_IN_FLIGHT: '2',
    }),
  );
  const held = new Pool(instance.url, { connections: QUEUE_MAX_EVENTS, pipelining: 1 });
  const refused = new Pool(instance.url, { connections: REFUSAL_CONCURRENCY, pipelining: 1 });
  const post = async (client: Pool, n: number) => {
    const t0 = process.hrtime.bigint();
    const { statusCode, body: response } = await client.request({
      path: `/events/publish?topic=${topic}`,
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: body(n),
    });
    const answer = (await response.json()) as { code?: string };
    return { answer: `${statusCode} ${answer.code ?? ''}`.trim(), ms: Number(process.hrtime.bigint() - t0) / 1e6 };
  };
  const heldEvents = async () =>
    ((await (await fetch(`${instance.url}/health`)).json()) as { stats: { producer: { events: number } } }).stats
      .producer.events;
  return {
    async round(): Promise<OverloadRound> {
      proxy.cut();
      let answered = 0;
      const holding = Array.from({ length: QUEUE_MAX_EVENTS }, (_, n) => post(held, n).finally(() => void answered++));
      await until('the producer to hold its most events', async () =>
        (await heldEvents()) >= QUEUE_MAX_EVENTS ? true : undefined,
      );
      const latencies: number[] = [];
      const other: Record<string, number> = {};
      let next = 0;
      await Promise.all(
        Array.from({ length: REFUSAL_CONCURRENCY }, async () => {
          while (next < REFUSALS) {
            const { answer, ms } = await post(refused, next++);
            if (answer === '503 OVERLOADED') latencies.push(ms);
            else other[answer] = (other[answer] ?? 0) + 1;
          }
        }),
      );
      const heldAnsweredEarly = answered;
      proxy.heal();
      await Promise.all(holding);
      const sorted = latencies.sort((x, y) => x - y);
      return {
        refusals: latencies.length,
        latencyMs: {
          p50: percentile(sorted, 50),
          p95: percentile(sorted, 95),
          p99: percentile(sorted, 99),
          max: sorted[sorted.length - 1],
        },
        other,
        heldAnsweredEarly,
      };
    },
    async stop(): Promise<void> {
      await held.close();
      await refused.close();
      await instance.stop();
      await proxy.stop();
    },
  };
}

/** The quota's rate (events/s), burst (seconds), sync period, and how long each round publishes over it. */
const QUOTA_RATE = Number(process.env.BENCH_QUOTA_RATE ?? 200);
const QUOTA_BURST_SECONDS = 1;
const QUOTA_SYNC_MS = 250;
const QUOTA_SECONDS = Number(process.env.BENCH_QUOTA_SECONDS ?? 10);
/** Publishers per gateway: together they ask for much more than the quota (a refusal costs no Kafka write). */
const QUOTA_PUBLISHERS = 12;

/** One round of `quota`: what was admitted, against the ideal and the bound. */
export interface QuotaRound {
  accepted: number;
  refused: number;
  other: number;
  seconds: number;
  /** rate x seconds + burst. */
  ideal: number;
  /** ideal + instances x rate x 2 sync periods (libs/security/tenant-quota-filter.ts). */
  bound: number;
}

/**
 * Two gated gateway processes (token, ACL, quota) sharing one tenant's quota of {@link QUOTA_RATE} events/s (burst
 * {@link QUOTA_BURST_SECONDS} s, synced every {@link QUOTA_SYNC_MS} ms through Postgres). `round` publishes as that
 * tenant through both for {@link QUOTA_SECONDS} s, after waiting for the tenant's bucket to be full again.
 */
export async function quotaGateways(topic: string, body: (n: number) => string) {
  const tenant = `bench-quota-${Date.now()}`;
  const env = {
    EVENTMESH_SECURITY_GATE_QUOTA_EVENTS_PER_SECOND: String(QUOTA_RATE),
    EVENTMESH_SECURITY_GATE_QUOTA_BURST_SECONDS: String(QUOTA_BURST_SECONDS),
    EVENTMESH_SECURITY_GATE_QUOTA_SYNC_MS: String(QUOTA_SYNC_MS),
  };
  const gateways = [
    await gatedGateway(topic, { instanceId: 'bench-publish-quota-a', audit: 'DENIALS', tenant, probe: body(0), env }),
    await gatedGateway(topic, { instanceId: 'bench-publish-quota-b', audit: 'DENIALS', tenant, probe: body(0), env }),
  ];
  const clients = gateways.map((g) => new Pool(g.url, { connections: QUOTA_PUBLISHERS, pipelining: 1 }));
  return {
    async round(): Promise<QuotaRound> {
      // The probes' admissions and the last round's are behind: wait out the burst so the bucket is full again.
      await new Promise((r) => setTimeout(r, (QUOTA_BURST_SECONDS * 1000 + 2 * QUOTA_SYNC_MS) * 2));
      let [accepted, refused, other, n] = [0, 0, 0, 0];
      const started = Date.now();
      const deadline = started + QUOTA_SECONDS * 1000;
      await Promise.all(
        gateways.flatMap((g, i) =>
          Array.from({ length: QUOTA_PUBLISHERS }, async () => {
            while (Date.now() < deadline) {
              const { statusCode, body: response } = await clients[i].request({
                path: `/events/publish?topic=${topic}`,
                method: 'POST',
                headers: { 'content-type': 'application/cloudevents+json', authorization: g.authorization },
                body: body(n++),
              });
              await response.dump();
              if (statusCode === 202) accepted++;
              else if (statusCode === 429) refused++;
              else other++;
            }
          }),
        ),
      );
      const seconds = (Date.now() - started) / 1000;
      const ideal = QUOTA_RATE * seconds + QUOTA_RATE * QUOTA_BURST_SECONDS;
      const bound = ideal + (gateways.length * QUOTA_RATE * 2 * QUOTA_SYNC_MS) / 1000;
      return { accepted, refused, other, seconds, ideal, bound };
    },
    async stop(): Promise<void> {
      for (const client of clients) await client.close();
      for (const g of gateways) await g.stop();
    },
    description: `${QUOTA_RATE} events/s, burst ${QUOTA_BURST_SECONDS} s, sync ${QUOTA_SYNC_MS} ms, 2 gateways x ${QUOTA_PUBLISHERS} publishers, ${QUOTA_SECONDS} s a round`,
  };
}

export const overloadDescription = `the producer holding its cap of ${QUEUE_MAX_EVENTS} events, Kafka cut off, ${REFUSALS} publishes past the cap, ${REFUSAL_CONCURRENCY} at once`;
