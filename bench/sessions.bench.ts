import { ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { EventMeshClient, type StreamSession } from '@eventmesh/client';
import { decodeSessionFrame, encodeSessionFrame } from '@libs/frame';
import { benchEnv, median, meterCpu, percentile, ROOT, sleep, startInstanceProcess, until } from './support';

/**
 * Streaming sessions against a minimal WebSocket relay, in the same run (`npm run bench:sessions`). The relay
 * (bench/session-relay.ts, a process of its own) forwards each binary message as it is: client -> relay -> agent and
 * back, and a publisher's messages to every subscriber: the least any broker in the middle costs. Ours is one built
 * instance process; on both paths the callers, agents, publishers and subscribers run in this process, the SDK on
 * ours and bare `ws` sockets on the relay's, sending the same session frames.
 *
 * - Mode 1 throughput: SESSIONS concurrent streams over one caller connection and one agent connection, each call
 *   answered with CHUNKS chunks of CHUNK_BYTES as fast as flow control lets it (ours: credit windows of WINDOW_BYTES;
 *   the relay: none, the agent only waits while its socket holds more than 4 MiB). Chunks/s from the first request to
 *   the last chunk read. Goal: ours >= 0.7x the relay.
 * - Mode 1 latency at half load: the same streams paced at half of ours' throughput of the round, each chunk timed
 *   from its send (a timestamp in it) to its read, on both paths. Goal: at most 1 ms of p50 added.
 * - CPU per chunk of the instance and of the relay process (from /proc), during the throughput run.
 * - Mode 2 fan-out: one publisher, SUBSCRIBERS subscribers (a connection each), PUBLICATIONS of CHUNK_BYTES;
 *   deliveries/s from the first publish to the last delivery, against the relay broadcasting the same.
 * - 10,000 idle sessions (IDLE_SESSIONS) opened to one agent replica over 10 connections: the instance's memory per
 *   session (V8 heap and external memory from its /metrics, and its resident set from /proc).
 *
 * BENCH_ROUNDS rounds (3), the paths taking turns going first; every round is printed, and the medians.
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 8);
const CHUNKS = Number(process.env.BENCH_CHUNKS ?? 4000);
const CHUNK_BYTES = Number(process.env.BENCH_CHUNK_BYTES ?? 1024);
const WINDOW_BYTES = Number(process.env.BENCH_WINDOW_BYTES ?? 256 * 1024);
const LATENCY_SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 3);
const SUBSCRIBERS = Number(process.env.BENCH_SUBSCRIBERS ?? 100);
const PUBLICATIONS = Number(process.env.BENCH_PUBLICATIONS ?? 1000);
const IDLE_SESSIONS = Number(process.env.BENCH_IDLE_SESSIONS ?? 10000);

const stamp = (chunk: Buffer) => chunk.writeDoubleBE(performance.now(), 0);
const age = (chunk: Buffer) => performance.now() - chunk.readDoubleBE(0);

interface Run {
  chunksPerSecond: number;
  latencyMs?: { p50: number; p95: number; p99: number };
  cpuUsPerChunk?: { instance?: number; relay?: number; bench: number };
}

// --- the relay and its bare clients --------------------------------------------------------------------------

async function startRelay(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [path.join(ROOT, 'dist/bench/session-relay.js')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const port = await until('the relay to listen', () => /listening (\d+)/.exec(out)?.[1], 10000);
  return { url: `ws://127.0.0.1:${port}`, child };
}

const open = (url: string) =>
  new Promise<WebSocket>((resolve, reject) => {
    const socket = new WebSocket(url, { maxPayload: 64 * 1024 * 1024 });
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
  });

/** Sends, waiting while the socket holds more than 4 MiB (the relay path's only bound). */
async function sendBounded(socket: WebSocket, data: Buffer): Promise<void> {
  while (socket.bufferedAmount > 4 * 1024 * 1024) await new Promise((r) => setImmediate(r));
  socket.send(data);
}

/** The relay's agent: answers each request frame with `chunks` chunk frames, paced at `perSecond` when given. */
function relayAgent(socket: WebSocket, chunks: number, perSecond?: number): void {
  socket.on('message', (raw: Buffer) => {
    const request = decodeSessionFrame(raw);
    void (async () => {
      const started = performance.now();
      for (let n = 0; n < chunks; n++) {
        if (perSecond) {
          const due = started + (n * 1000) / perSecond;
          if (due > performance.now()) await sleep(due - performance.now());
        }
        const data = Buffer.alloc(CHUNK_BYTES);
        stamp(data);
        await sendBounded(socket, encodeSessionFrame({ kind: 'chunk', id: request.id, call: 1, data }));
      }
    })();
  });
}

async function relayMode1(
  relay: string,
  chunks: number,
  perSecond?: number,
): Promise<{ seconds: number; latencies: number[] }> {
  const agent = await open(`${relay}/agent`);
  const caller = await open(`${relay}/caller`);
  relayAgent(agent, chunks, perSecond);
  const latencies: number[] = [];
  let read = 0;
  const done = new Promise<void>((resolve) =>
    caller.on('message', (raw: Buffer) => {
      latencies.push(age(decodeSessionFrame(raw).data));
      if (++read === SESSIONS * chunks) resolve();
    }),
  );
  const started = performance.now();
  for (let s = 0; s < SESSIONS; s++)
    caller.send(encodeSessionFrame({ kind: 'request', id: `bench:stream-${s}`, call: 1 }));
  await done;
  const seconds = (performance.now() - started) / 1000;
  agent.close();
  caller.close();
  return { seconds, latencies };
}

// --- ours ------------------------------------------------------------------------------------------------------

async function oursMode1(
  sessions: StreamSession[],
  chunks: number,
  pace: { perSecond?: number },
): Promise<{ seconds: number; latencies: number[] }> {
  const latencies: number[] = [];
  const started = performance.now();
  await Promise.all(
    sessions.map((session) =>
      session.call({ chunks, perSecond: pace.perSecond ?? 0 }).forEach((chunk) => {
        latencies.push(age(chunk));
      }),
    ),
  );
  return { seconds: (performance.now() - started) / 1000, latencies };
}

async function serveBenchAgent(mesh: EventMeshClient): Promise<void> {
  await mesh.streaming().serve('bench', async (request, { send }) => {
    const { chunks, perSecond } = request.json<{ chunks: number; perSecond: number }>();
    const started = performance.now();
    for (let n = 0; n < chunks; n++) {
      if (perSecond > 0) {
        const due = started + (n * 1000) / perSecond;
        if (due > performance.now()) await sleep(due - performance.now());
      }
      const data = Buffer.alloc(CHUNK_BYTES);
      stamp(data);
      await send(data);
    }
  });
}

// --- Mode 2 ------------------------------------------------------------------------------------------------------

async function relayFanOut(relay: string): Promise<number> {
  const subs = await Promise.all(Array.from({ length: SUBSCRIBERS }, () => open(`${relay}/sub`)));
  const publisher = await open(`${relay}/pub`);
  let delivered = 0;
  const done = new Promise<void>((resolve) => {
    for (const s of subs)
      s.on('message', () => {
        if (++delivered === SUBSCRIBERS * PUBLICATIONS) resolve();
      });
  });
  const started = performance.now();
  for (let n = 0; n < PUBLICATIONS; n++)
    await sendBounded(publisher, encodeSessionFrame({ kind: 'chunk', id: 'room', n, data: Buffer.alloc(CHUNK_BYTES) }));
  await done;
  const perSecond = delivered / ((performance.now() - started) / 1000);
  for (const s of [...subs, publisher]) s.close();
  return perSecond;
}

async function oursFanOut(url: string, round: number): Promise<number> {
  const name = `bench-room-${round}-${Date.now()}`;
  const clients = Array.from({ length: SUBSCRIBERS + 1 }, () => new EventMeshClient({ url }));
  const subs = await Promise.all(clients.slice(1).map((c) => c.streaming().subscribeSession(name)));
  const publisher = await clients[0].streaming().openSessionPublisher(name);
  let delivered = 0;
  const started = performance.now();
  const reading = Promise.all(
    subs.map(async (s) => {
      let got = 0;
      for await (const _p of s) {
        delivered++;
        if (++got === PUBLICATIONS) break;
      }
    }),
  );
  for (let n = 0; n < PUBLICATIONS; n++) await publisher.publish(Buffer.alloc(CHUNK_BYTES));
  await reading;
  const perSecond = delivered / ((performance.now() - started) / 1000);
  await Promise.all(clients.map((c) => c.close()));
  return perSecond;
}

// --- idle sessions -------------------------------------------------------------------------------------------------

async function memoryOf(url: string, pid: number): Promise<{ heap: number; rss: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
  return { heap: value('nodejs_heap_size_used_bytes') + value('nodejs_external_memory_bytes'), rss: rssKb * 1024 };
}

async function idleSessions(url: string, pid: number): Promise<{ heapPerSession: number; rssPerSession: number }> {
  const agent = new EventMeshClient({ url });
  await agent.streaming().serve('idle', () => undefined);
  const callers = Array.from({ length: 10 }, () => new EventMeshClient({ url }));
  for (const c of callers)
    await (await c.streaming().openSession('idle', { waitMs: 5000, windowBytes: 64 * 1024 })).close();
  await sleep(2000);
  const before = await memoryOf(url, pid);
  const sessions: StreamSession[] = [];
  for (let i = 0; i < IDLE_SESSIONS; i += 500)
    sessions.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(500, IDLE_SESSIONS - i) }, (_, k) =>
          callers[(i + k) % 10].streaming().openSession('idle', { windowBytes: 64 * 1024 }),
        ),
      )),
    );
  await sleep(2000);
  const after = await memoryOf(url, pid);
  for (const s of sessions) s.close();
  await Promise.all([agent, ...callers].map((c) => c.close()));
  return {
    heapPerSession: (after.heap - before.heap) / IDLE_SESSIONS,
    rssPerSession: (after.rss - before.rss) / IDLE_SESSIONS,
  };
}

// --- the run ---------------------------------------------------------------------------------------------------------

const f = (n: number | undefined, d = 0) => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(d));
const latencyOf = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p95: percentile(sorted, 95), p99: percentile(sorted, 99) };
};

async function main(): Promise<void> {
  const instance = await startInstanceProcess(
    benchEnv({
      EVENTMESH_INSTANCE_ID: `bench-sessions-${process.pid}`,
      EVENTMESH_HTTP_PORT: '0',
      EVENTMESH_SESSIONS_MAX_BYTES_IN_FLIGHT_PER_TENANT: String(64 * 1024 * 1024 * 1024),
    }),
  );
  const relay = await startRelay();
  const stop = async () => {
    relay.child.kill();
    await instance.stop();
  };
  process.once('SIGINT', () => void stop().then(() => process.exit(130)));
  try {
    console.log(
      `sessions benchmark: ${ROUNDS} rounds; Mode 1 ${SESSIONS} streams x ${CHUNKS} chunks of ${CHUNK_BYTES} B ` +
        `(window ${WINDOW_BYTES / 1024} KiB); Mode 2 ${SUBSCRIBERS} subscribers x ${PUBLICATIONS} publications`,
    );
    const agent = new EventMeshClient({ url: instance.url });
    await serveBenchAgent(agent);
    const caller = new EventMeshClient({ url: instance.url });
    const sessions = await Promise.all(
      Array.from({ length: SESSIONS }, () =>
        caller.streaming().openSession('bench', { waitMs: 5000, windowBytes: WINDOW_BYTES }),
      ),
    );
    await oursMode1(sessions, 200, {}); // warm-up
    await relayMode1(relay.url, 200);
    const rounds: { ours: Run; relay: Run; oursHalf: Run; relayHalf: Run; fanOurs: number; fanRelay: number }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const chunks = SESSIONS * CHUNKS;
      const measureOurs = async (): Promise<Run> => {
        const cpu = meterCpu({ instance: instance.child.pid, bench: 'self' });
        const r = await oursMode1(sessions, CHUNKS, {});
        const used = cpu();
        return {
          chunksPerSecond: chunks / r.seconds,
          cpuUsPerChunk: { instance: (used.instance / chunks) * 1e6, bench: (used.bench / chunks) * 1e6 },
        };
      };
      const measureRelay = async (): Promise<Run> => {
        const cpu = meterCpu({ relay: relay.child.pid, bench: 'self' });
        const r = await relayMode1(relay.url, CHUNKS);
        const used = cpu();
        return {
          chunksPerSecond: chunks / r.seconds,
          cpuUsPerChunk: { relay: (used.relay / chunks) * 1e6, bench: (used.bench / chunks) * 1e6 },
        };
      };
      const [ours, relayRun] =
        round % 2 === 0
          ? [await measureOurs(), await measureRelay()]
          : await (async () => {
              const r = await measureRelay();
              return [await measureOurs(), r] as const;
            })();
      // Half load: half of ours' throughput of this round, paced per stream, on both paths.
      const perStream = ours.chunksPerSecond / 2 / SESSIONS;
      const paced = Math.max(50, Math.round(perStream * LATENCY_SECONDS));
      const half = async (which: 'ours' | 'relay'): Promise<Run> => {
        const r =
          which === 'ours'
            ? await oursMode1(sessions, paced, { perSecond: perStream })
            : await relayMode1(relay.url, paced, perStream);
        return { chunksPerSecond: (SESSIONS * paced) / r.seconds, latencyMs: latencyOf(r.latencies) };
      };
      const oursHalf = round % 2 === 0 ? await half('ours') : undefined;
      const relayHalf = await half('relay');
      const oursHalfRun = oursHalf ?? (await half('ours'));
      const fanOurs = round % 2 === 0 ? await oursFanOut(instance.url, round) : 0;
      const fanRelay = await relayFanOut(relay.url);
      const fanOursRun = fanOurs || (await oursFanOut(instance.url, round));
      rounds.push({ ours, relay: relayRun, oursHalf: oursHalfRun, relayHalf, fanOurs: fanOursRun, fanRelay });
      console.log(
        `round ${round + 1}: Mode 1 ours ${f(ours.chunksPerSecond)} chunks/s, relay ${f(relayRun.chunksPerSecond)} ` +
          `(${f(ours.chunksPerSecond / relayRun.chunksPerSecond, 2)}x); CPU per chunk: instance ${f(ours.cpuUsPerChunk?.instance, 1)} µs, ` +
          `relay ${f(relayRun.cpuUsPerChunk?.relay, 1)} µs, this process ${f(ours.cpuUsPerChunk?.bench, 1)} / ${f(relayRun.cpuUsPerChunk?.bench, 1)} µs; ` +
          `half load (${f(perStream * SESSIONS)} chunks/s) p50/p95/p99 ms: ours ${f(oursHalfRun.latencyMs!.p50, 2)}/${f(oursHalfRun.latencyMs!.p95, 2)}/${f(oursHalfRun.latencyMs!.p99, 2)}, ` +
          `relay ${f(relayHalf.latencyMs!.p50, 2)}/${f(relayHalf.latencyMs!.p95, 2)}/${f(relayHalf.latencyMs!.p99, 2)}; ` +
          `Mode 2 fan-out ours ${f(fanOursRun)} deliveries/s, relay ${f(fanRelay)} (${f(fanOursRun / fanRelay, 2)}x)`,
      );
    }
    const ratio = median(rounds.map((r) => r.ours.chunksPerSecond / r.relay.chunksPerSecond));
    const added = median(rounds.map((r) => r.oursHalf.latencyMs!.p50 - r.relayHalf.latencyMs!.p50));
    const fanRatio = median(rounds.map((r) => r.fanOurs / r.fanRelay));
    console.log('\n| measure | ours (median) | relay (median) | ratio / added, median (per round) | goal |');
    console.log('|---|---|---|---|---|');
    console.log(
      `| Mode 1 chunks/s | ${f(median(rounds.map((r) => r.ours.chunksPerSecond)))} | ${f(median(rounds.map((r) => r.relay.chunksPerSecond)))} | ` +
        `**${f(ratio, 2)}x** (${rounds.map((r) => f(r.ours.chunksPerSecond / r.relay.chunksPerSecond, 2)).join(', ')}) | >= 0.7x: ${ratio >= 0.7 ? 'met' : 'NOT met'} |`,
    );
    console.log(
      `| Mode 1 p50 at half load, ms | ${f(median(rounds.map((r) => r.oursHalf.latencyMs!.p50)), 2)} | ${f(median(rounds.map((r) => r.relayHalf.latencyMs!.p50)), 2)} | ` +
        `**${added >= 0 ? '+' : ''}${f(added, 2)} ms** (${rounds.map((r) => f(r.oursHalf.latencyMs!.p50 - r.relayHalf.latencyMs!.p50, 2)).join(', ')}) | <= 1 ms: ${added <= 1 ? 'met' : 'NOT met'} |`,
    );
    console.log(
      `| CPU per chunk, µs | instance ${f(median(rounds.map((r) => r.ours.cpuUsPerChunk!.instance!)), 1)} | relay ${f(median(rounds.map((r) => r.relay.cpuUsPerChunk!.relay!)), 1)} | - | - |`,
    );
    console.log(
      `| Mode 2 deliveries/s to ${SUBSCRIBERS} | ${f(median(rounds.map((r) => r.fanOurs)))} | ${f(median(rounds.map((r) => r.fanRelay)))} | ` +
        `**${f(fanRatio, 2)}x** (${rounds.map((r) => f(r.fanOurs / r.fanRelay, 2)).join(', ')}) | - |`,
    );
    await Promise.all([agent.close(), caller.close()]);
    const idle = await idleSessions(instance.url, instance.child.pid!);
    console.log(
      `\n${IDLE_SESSIONS} idle sessions (caller and replica on the instance): ${f(idle.heapPerSession)} B of V8 heap + external ` +
        `per session, ${f(idle.rssPerSession)} B of resident set per session`,
    );
  } finally {
    await stop();
  }
}

void main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
