import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { Message, Task, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { Kafka, logLevel } from 'kafkajs';
import { requestTopicOf } from '@libs/a2a';
import { BURST_SETTLE_MS, runBurst } from './a2a-burst';
import { BenchEchoAgent, echoRequest, textOf } from './a2a-echo-agent';
import { medianTimeline, summarize } from './a2a-timeline';
import {
  benchConfig,
  benchEnv,
  brokerPid,
  createTopics,
  median,
  meterCpu,
  percentile,
  postgresPid,
  ROOT,
  sleep,
  startInstanceProcess,
  temporalPid,
} from './support';

/**
 * A2A through the mesh against its two references, in the same run (`npm run bench:a2a`), with an echo agent (an
 * A2A server on loopback built from the SDK's server classes, in this process, bench/a2a-echo-agent.ts):
 * (1) `direct`: the SDK's stock client sends each task to the agent itself (blocking `SendMessage`, JSON-RPC v1.0);
 * (2) `temporal`: a bare Temporal baseline, one minimal workflow (bench/a2a-baseline.workflows.ts: returns its input,
 *     no activity) started and awaited per task, on a task queue of its own served by a worker in this process, with
 *     eager start (the client on the worker's connection, as the mesh starts its task workflows): the least a durable
 *     task costs on this Temporal server;
 * (4) `queued`, for reference (not a goal's): the same workflow started through a client of its own, through the task
 *     queue (`workflow.execute`), as a starter without a worker on its connection does;
 * (3) `mesh`: the same stock client sends each task to the mesh (blocking `SendMessage` at the card the mesh serves
 *     for the agent, registered as an A2A server at its URL), through one built instance process (gateway and
 *     worker): Postgres, the agent's request topic in Kafka, the task's workflow `a2a-task/<id>` and its delivery.
 * Every answer is checked: a completed task whose artifact is the text sent (a workflow's result is its input).
 *
 * Load: (3)'s maximum throughput is found by ramping the concurrency (1, 2, 4, ... up to BENCH_MAX_CONCURRENCY,
 * BENCH_RAMP_SECONDS each and at least 3 tasks per concurrent sender, until two steps in a row gain less than 5%); or BENCH_CONCURRENCY fixes it. Then each of
 * BENCH_ROUNDS rounds measures the three paths closed-loop at that concurrency for BENCH_DURATION_SECONDS each
 * (throughput), and (1) and (3) open-loop at half of (3)'s maximum throughput (latency, each measured from the
 * moment its send was due), the paths taking turns. Goals: (3) >= 0.5x the throughput of (2), and at most 25 ms of
 * p50 added by (3) over (1) at half load; the ratio (3)/(1) is reported too. Where the mesh's time goes: a sample of
 * the half-load tasks' workflow histories, as a timeline, and the CPU per task of each process (from /proc).
 *
 * Burst (bench/a2a-burst.ts): 1,000 non-blocking sends through the mesh to the echo agent in a process of its own,
 * SIGKILLed half-way and started again; 0 lost, each task completed once. BENCH_PHASES=load,burst picks the phases.
 *
 * The whole run is bounded by BENCH_BUDGET_SECONDS (300): the burst's waits end then, and tasks still open are
 * reported as such (neither lost nor completed). On SIGINT or SIGTERM, and after a failure, the run cleans up: the
 * instance stopped, the agent's task workflows still running terminated, its request topic and the run's topic deleted.
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION_SECONDS ?? 5);
const RAMP_S = Number(process.env.BENCH_RAMP_SECONDS ?? 3);
const FIXED_CONCURRENCY = process.env.BENCH_CONCURRENCY ? Number(process.env.BENCH_CONCURRENCY) : undefined;
const MAX_CONCURRENCY = Number(process.env.BENCH_MAX_CONCURRENCY ?? 64);
/** The whole run's bound: the burst's waits end by then (less the time to clean up), whatever is still open is reported so. */
const BUDGET_MS = Number(process.env.BENCH_BUDGET_SECONDS ?? 300) * 1000;
const CLEANUP_MS = 20000;
const runStartedAt = Date.now();
/** Aborted on SIGINT or SIGTERM: every wait of the run ends, so the cleanup runs. */
const stopRequested = new AbortController();
const stopping = () => stopRequested.signal.aborted;
function checkStop(): void {
  if (stopping()) throw new Error('interrupted');
}
const budgetLeft = () => runStartedAt + BUDGET_MS - CLEANUP_MS - Date.now();
const PHASES = (process.env.BENCH_PHASES ?? 'load,burst').split(',');
/** The deadline of one task on any path: a task past it counts as an error. */
const OP_TIMEOUT_MS = 30000;
/** How many half-load tasks of (3) have their workflow history read for the timeline. */
const TIMELINE_SAMPLE = 30;

const config = benchConfig();
const run = randomUUID().slice(0, 6);

/** One task on one path: resolves with the mesh's task id (mesh path) once the answer is checked; throws otherwise. */
type Op = (n: number) => Promise<string | undefined>;
/**
 * Another checkout whose build runs a second instance (an A/B in the same run, e.g. /work/main): path (5), `meshB`,
 * sends as (3) does through it, to the same agent; its instance's CPU is metered beside (3)'s (`instanceB`).
 */
const AB_ROOT = process.env.BENCH_AB_ROOT;
/** The checkout whose build runs (3)'s instance (this one by default): swapped with BENCH_AB_ROOT, the A/B is run both ways. */
const INSTANCE_ROOT = process.env.BENCH_INSTANCE_ROOT;
/** The paths, numbered (1) to (4) in this order, and (5) with BENCH_AB_ROOT. */
const PATHS = ['direct', 'temporal', 'mesh', 'queued', ...(AB_ROOT ? (['meshB'] as const) : [])] as const;

interface Run {
  path: string;
  concurrency?: number;
  offeredPerSecond?: number;
  done: number;
  errors: number;
  firstError?: string;
  seconds: number;
  perSecond: number;
  latencies: number[];
  cpu: Record<string, number>;
  /** The mesh's task ids of the tasks done (mesh path). */
  taskIds: string[];
}

/** A blocking send's answer must be the completed task, its artifact the text sent. */
function checkEcho(answer: Message | Task, text: string): string {
  if (!('status' in answer)) throw new Error('answered a Message, not a task');
  const state = answer.status?.state;
  if (state !== TaskState.TASK_STATE_COMPLETED)
    throw new Error(`task ${answer.id} answered ${taskStateToJSON(state ?? TaskState.TASK_STATE_UNSPECIFIED)}`);
  const echoed = answer.artifacts.map((a) => textOf(a)).join('');
  if (echoed !== text)
    throw new Error(`task ${answer.id} echoed ${JSON.stringify(echoed)} for ${JSON.stringify(text)}`);
  return answer.id;
}

let pids: Record<string, number | 'self' | undefined> = {};

function meter(): () => Record<string, number> {
  return meterCpu(pids);
}

/**
 * `concurrency` workers each sending one task after another for `seconds`, and until `minTasks` were sent (a ramp
 * step whose tasks take longer than the step would otherwise be measured on its drain).
 */
async function closedLoop(pathName: string, op: Op, concurrency: number, seconds: number, minTasks = 0): Promise<Run> {
  const latencies: number[] = [];
  const taskIds: string[] = [];
  let errors = 0;
  let firstError: string | undefined;
  let next = 0;
  const cpu = meter();
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while ((performance.now() < end || next < minTasks) && !stopping()) {
        const t0 = performance.now();
        try {
          const id = await op(next++);
          latencies.push(performance.now() - t0);
          if (id) taskIds.push(id);
        } catch (e) {
          errors++;
          firstError ??= (e as Error).message;
        }
      }
    }),
  );
  checkStop();
  const elapsed = (performance.now() - started) / 1000;
  return {
    path: pathName,
    concurrency,
    done: latencies.length,
    errors,
    firstError,
    seconds: elapsed,
    perSecond: latencies.length / elapsed,
    latencies,
    cpu: cpu(),
    taskIds,
  };
}

/** Tasks sent at `rate` a second for `seconds`, each timed from the moment it was due (no coordinated omission). */
async function openLoop(pathName: string, op: Op, rate: number, seconds: number): Promise<Run> {
  const latencies: number[] = [];
  const taskIds: string[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const total = Math.max(1, Math.round(rate * seconds));
  const interval = 1000 / rate;
  const cpu = meter();
  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let n = 0; n < total && !stopping(); n++) {
    const due = started + n * interval;
    const wait = due - performance.now();
    if (wait >= 1) await sleep(wait);
    inFlight.push(
      op(n).then(
        (id) => {
          latencies.push(performance.now() - due);
          if (id) taskIds.push(id);
        },
        (e: unknown) => {
          errors++;
          firstError ??= (e as Error).message;
        },
      ),
    );
  }
  await Promise.all(inFlight);
  checkStop();
  const elapsed = (performance.now() - started) / 1000;
  return {
    path: pathName,
    offeredPerSecond: rate,
    done: latencies.length,
    errors,
    firstError,
    seconds: elapsed,
    perSecond: latencies.length / elapsed,
    latencies,
    cpu: cpu(),
    taskIds,
  };
}

const p = (r: Run, q: number) =>
  percentile(
    [...r.latencies].sort((a, b) => a - b),
    q,
  );
const f = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : '-');

/** (3) against (5), the other build's instance: throughput, instance CPU per task, p50 added at half load. */
function abLine(full: Record<string, Run>, half: Record<string, Run>): string {
  const cpuMs = (r: Run, key: string) => f((r.cpu[key] / r.done) * 1000, 2);
  return (
    `(3)/(5) throughput ${f(full.mesh.perSecond / full.meshB.perSecond, 3)}x; instance CPU per task (3) ${cpuMs(full.mesh, 'instance')} ms, ` +
    `(5) ${cpuMs(full.meshB, 'instanceB')} ms; half load p50 added (3) ${f(p(half.mesh, 50) - p(half.direct, 50))} ms, ` +
    `(5) ${f(p(half.meshB, 50) - p(half.direct, 50))} ms`
  );
}

function cpuPerTask(r: Run): string {
  return (
    Object.entries(r.cpu)
      // A figure that is not a number (a process not found) or below zero is shown as unknown.
      .map(
        ([name, s]) =>
          `${name} ${Number.isFinite(s) && s >= 0 && r.done > 0 ? Math.round((s / r.done) * 1e6) : '?'} µs`,
      )
      .join(', ')
  );
}

function line(r: Run): string {
  const load = r.concurrency !== undefined ? `concurrency ${r.concurrency}` : `offered ${f(r.offeredPerSecond!, 0)}/s`;
  return (
    `${r.path} (${load}): ${r.done} tasks in ${f(r.seconds, 2)} s, ${f(r.perSecond, 0)}/s, p50 ${f(p(r, 50))} p95 ${f(p(r, 95))} p99 ${f(p(r, 99))} ms` +
    (r.errors > 0 ? `, ${r.errors} errors (first: ${r.firstError})` : '')
  );
}

/** Terminates the task workflows of the run's agent still running (a run that failed or was cut short): nobody would answer them. */
async function endTaskWorkflows(temporal: TemporalClient, agentName: string): Promise<void> {
  try {
    for await (const wf of temporal.workflow.list({
      query: `EventMeshAgent = '${agentName}' AND ExecutionStatus = 'Running'`,
    })) {
      await temporal.workflow
        .getHandle(wf.workflowId)
        .terminate('bench:a2a ended')
        .catch(() => undefined);
    }
  } catch (e) {
    console.error(`could not end the run's task workflows: ${(e as Error).message}`);
  }
}

// --- main ----------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  console.log(`A2A benchmark: ${ROUNDS} rounds of ${DURATION_S} s per path; phases ${PHASES.join(', ')}`);
  console.log(
    `machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, Node ${process.version}, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  const agent = new BenchEchoAgent();
  await agent.start();
  const agentName = `bench-echo-${run}`;
  const kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'bench-a2a', logLevel: logLevel.NOTHING });

  // (2): a worker of the minimal workflow in this process, on a task queue of its own (its log: warnings only).
  Runtime.install({ logger: new DefaultLogger('WARN'), shutdownSignals: [] });
  const taskQueue = `bench-a2a-${run}`;
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('./a2a-baseline.workflows'),
    logger: {
      log: () => undefined,
      trace: () => undefined,
      debug: () => undefined,
      info: () => undefined,
      warn: () => undefined,
      error: (m: string) => process.stderr.write(`${m}\n`),
    },
  });
  const workerConnection = await NativeConnection.connect({ address: config.temporal.address });
  const worker = await Worker.create({
    connection: workerConnection,
    namespace: config.temporal.namespace,
    taskQueue,
    workflowBundle: { code },
  });
  const workerRun = worker.run();
  // (2)'s starter shares the worker's connection, so the server hands each workflow's first task back in the start
  // call's answer (eager start), as the mesh's instance does with its task workflows.
  const baseline = new TemporalClient({ connection: workerConnection, namespace: config.temporal.namespace });
  const baselineStarts = { total: 0, eager: 0 };
  /** (2) and (4): the bare workflow started (eagerly or through the task queue) and awaited; its result is its input. */
  const bareWorkflow = async (client: TemporalClient, prefix: string, eager: boolean): Promise<undefined> => {
    const id = `${prefix}-${randomUUID().slice(0, 4)}`;
    const handle = await client.workflow.start('benchA2aBaseline', {
      taskQueue,
      workflowId: id,
      args: [id],
      workflowExecutionTimeout: OP_TIMEOUT_MS,
      requestEagerStart: eager,
    });
    if (eager) {
      baselineStarts.total++;
      if (handle.eagerlyStarted) baselineStarts.eager++;
    }
    const result: unknown = await handle.result();
    if (result !== id) throw new Error(`workflow ${id} returned ${String(result)}`);
    return undefined;
  };
  const connection = await Connection.connect({ address: config.temporal.address });
  const temporal = new TemporalClient({ connection, namespace: config.temporal.namespace });

  await createTopics(kafka, [`bench-a2a-${run}`], 6);
  const instanceEnv = (id: string) =>
    benchEnv({
      EVENTMESH_INSTANCE_ID: id,
      EVENTMESH_HTTP_PORT: '0',
      EVENTMESH_KAFKA_TOPICS: `bench-a2a-${run}`,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '6',
      EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
      EVENTMESH_AGENTS_CALL_TIMEOUT_MS: '5000',
      EVENTMESH_AGENTS_TASK_TIMEOUT_MS: String(BURST_SETTLE_MS + 60000),
    });
  const instance = await startInstanceProcess(instanceEnv(`a2a${run}`), INSTANCE_ROOT);
  const instanceB = AB_ROOT ? await startInstanceProcess(instanceEnv(`a2a${run}b`), AB_ROOT) : undefined;
  pids = {
    bench: 'self',
    instance: instance.child.pid,
    ...(instanceB ? { instanceB: instanceB.child.pid } : {}),
    temporal: temporalPid(),
    postgres: await postgresPid(),
    broker: brokerPid(),
  };
  try {
    const put = await fetch(`${instance.url}/a2a/agents/${agentName}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(agent.card()),
    });
    if (put.status !== 201) throw new Error(`registering the agent: ${put.status} ${await put.text()}`);
    const factory = new ClientFactory();
    const direct = await factory.createFromUrl(agent.url);
    const mesh = await factory.createFromUrl(`${instance.url}/a2a/agents/${agentName}/.well-known/agent-card.json`, '');
    // The agent is registered once, in Postgres: the other build's instance serves it too.
    const meshB =
      instanceB &&
      (await factory.createFromUrl(`${instanceB.url}/a2a/agents/${agentName}/.well-known/agent-card.json`, ''));
    const signal = () => AbortSignal.timeout(OP_TIMEOUT_MS);
    const ops: Record<string, Op> = {
      direct: async (n) => {
        const text = `direct-${run}-${n}-${randomUUID().slice(0, 4)}`;
        checkEcho(await direct.sendMessage(echoRequest(text), { signal: signal() }), text);
        return undefined;
      },
      temporal: (n) => bareWorkflow(baseline, `bench-a2a-base-${run}-${n}`, true),
      mesh: async (n) => {
        const text = `mesh-${run}-${n}-${randomUUID().slice(0, 4)}`;
        return checkEcho(await mesh.sendMessage(echoRequest(text), { signal: signal() }), text);
      },
      queued: (n) => bareWorkflow(temporal, `bench-a2a-queued-${run}-${n}`, false),
      meshB: async (n) => {
        const text = `meshB-${run}-${n}-${randomUUID().slice(0, 4)}`;
        return checkEcho(await meshB!.sendMessage(echoRequest(text), { signal: signal() }), text);
      },
    };

    if (PHASES.includes('load')) {
      // Warm-up: connections, the workers' caches, JIT.
      for (const name of PATHS) await closedLoop(name, ops[name], 4, 1.5);

      // (3)'s maximum throughput: the concurrency ramped until two steps in a row gain less than 5%.
      let best = { concurrency: FIXED_CONCURRENCY ?? 1, perSecond: 0 };
      if (FIXED_CONCURRENCY === undefined) {
        console.log(`\nramp of (3) mesh, ${RAMP_S} s per step and at least 3 tasks per sender:`);
        let flat = 0;
        for (let c = 1; c <= MAX_CONCURRENCY && flat < 2; c *= 2) {
          const r = await closedLoop('mesh', ops.mesh, c, RAMP_S, 3 * c);
          console.log(`  ${line(r)}`);
          if (r.perSecond >= best.perSecond * 1.05) flat = 0;
          else flat++;
          if (r.perSecond > best.perSecond) best = { concurrency: c, perSecond: r.perSecond };
        }
        console.log(`  maximum: ${f(best.perSecond, 0)} tasks/s at concurrency ${best.concurrency}`);
      } else {
        best.perSecond = (await closedLoop('mesh', ops.mesh, best.concurrency, RAMP_S)).perSecond;
        console.log(`\nconcurrency ${best.concurrency} (BENCH_CONCURRENCY): (3) mesh ${f(best.perSecond, 0)} tasks/s`);
      }
      const concurrency = best.concurrency;
      const halfRate = best.perSecond / 2;

      const rounds: { full: Record<string, Run>; half: Record<string, Run> }[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const full: Record<string, Run> = {};
        const half: Record<string, Run> = {};
        // The paths take turns, starting one further each round: the host's other load changes over a round.
        for (let i = 0; i < PATHS.length; i++) {
          const name = PATHS[(i + round) % PATHS.length];
          full[name] = await closedLoop(name, ops[name], concurrency, DURATION_S);
        }
        const halfPaths = ['direct', 'mesh', ...(meshB ? ['meshB'] : [])];
        for (const name of round % 2 === 0 ? halfPaths : halfPaths.reverse()) {
          half[name] = await openLoop(name, ops[name], halfRate, DURATION_S);
        }
        rounds.push({ full, half });
        console.log(`\nround ${round + 1}/${ROUNDS}:`);
        for (const r of [...Object.values(full), ...Object.values(half)]) console.log(`  ${line(r)}`);
        if (meshB) console.log(`  A/B: ${abLine(full, half)}`);
        console.log(
          `  (3)/(2) throughput ${f(full.mesh.perSecond / full.temporal.perSecond, 3)}x ((3)/(4) ${f(full.mesh.perSecond / full.queued.perSecond, 3)}x), (3)/(1) throughput ${f(full.mesh.perSecond / full.direct.perSecond, 2)}x; ` +
            `half load: p50 added ${f(p(half.mesh, 50) - p(half.direct, 50))} ms, (3)/(1) p50 ${f(p(half.mesh, 50) / p(half.direct, 50), 1)}x`,
        );
      }

      // The round with the median (3)/(2) ratio for the table; the medians of each figure over the rounds.
      const ratio32 = rounds.map((r) => r.full.mesh.perSecond / r.full.temporal.perSecond);
      const ratio31 = rounds.map((r) => r.full.mesh.perSecond / r.full.direct.perSecond);
      const ratio34 = rounds.map((r) => r.full.mesh.perSecond / r.full.queued.perSecond);
      const added = rounds.map((r) => p(r.half.mesh, 50) - p(r.half.direct, 50));
      const p50ratio = rounds.map((r) => p(r.half.mesh, 50) / p(r.half.direct, 50));
      const mid = rounds[ratio32.indexOf(median(ratio32))];
      console.log(
        `\nThe round with the median (3)/(2) ratio; throughput at concurrency ${concurrency}, latency at ${f(halfRate, 0)} tasks/s offered (half of (3)'s maximum):\n`,
      );
      console.log(
        '| path | tasks/s (concurrency ' +
          concurrency +
          ') | p50 ms | p95 ms | p99 ms | half load: p50 ms | p95 ms | p99 ms | CPU per task at full load |',
      );
      console.log('|---|---|---|---|---|---|---|---|---|');
      for (const name of PATHS) {
        const fr = mid.full[name];
        const hr = mid.half[name];
        const halfCols = hr ? `${f(p(hr, 50))} | ${f(p(hr, 95))} | ${f(p(hr, 99))}` : '- | - | -';
        console.log(
          `| (${(PATHS as readonly string[]).indexOf(name) + 1}) ${name} | ${f(fr.perSecond, 0)} | ${f(p(fr, 50))} | ${f(p(fr, 95))} | ${f(p(fr, 99))} | ${halfCols} | ${cpuPerTask(fr)} |`,
        );
      }
      const errors = rounds.reduce(
        (n, r) => n + [...Object.values(r.full), ...Object.values(r.half)].reduce((m, x) => m + x.errors, 0),
        0,
      );
      console.log(
        `\n(3)/(2) throughput: median ${f(median(ratio32), 2)}x (goal >= 0.8x, issue 36: ${median(ratio32) >= 0.8 ? 'met' : 'NOT met'}); per round ${ratio32.map((x) => f(x, 3)).join(', ')}`,
      );
      console.log(
        `(3)/(4), against the workflow started through the task queue (for reference): median ${f(median(ratio34), 2)}x; per round ${ratio34.map((x) => f(x, 3)).join(', ')}`,
      );
      console.log(
        `added p50 of (3) over (1) at half load: median ${f(median(added))} ms (goal <= 15 ms, issue 36: ${median(added) <= 15 ? 'met' : 'NOT met'}); per round ${added.map((x) => f(x)).join(', ')}`,
      );
      console.log(
        `(3)/(1): throughput median ${f(median(ratio31), 2)}x (per round ${ratio31.map((x) => f(x, 2)).join(', ')}); p50 at half load median ${f(median(p50ratio), 1)}x`,
      );
      /** A path's instance CPU per task (ms) in each round, at full load. */
      const cpuMs = (key: 'mesh' | 'meshB', pid: string) =>
        rounds.map((r) => (r.full[key].cpu[pid] / r.full[key].done) * 1000);
      const a = cpuMs('mesh', 'instance');
      console.log(
        `(3)'s instance CPU per task at full load: median ${f(median(a), 2)} ms (goal <= 10 ms, issue 36: ${median(a) <= 10 ? 'met' : 'NOT met'}); per round ${a.map((x) => f(x, 2)).join(', ')}`,
      );
      if (meshB) {
        const b = cpuMs('meshB', 'instanceB');
        const ratios = a.map((x, i) => x / b[i]);
        console.log(
          `A/B, instance CPU per task: (3) ${INSTANCE_ROOT ?? ROOT} median ${f(median(a), 2)} ms (per round ${a.map((x) => f(x, 2)).join(', ')}); ` +
            `(5) ${AB_ROOT} median ${f(median(b), 2)} ms (${b.map((x) => f(x, 2)).join(', ')}); (3)/(5) median ${f(median(ratios), 2)}x (${ratios.map((x) => f(x, 2)).join(', ')})`,
        );
      }
      console.log(`(2)'s workflows started eagerly: ${baselineStarts.eager} of ${baselineStarts.total}`);
      // The mesh's own count, over the whole run (warm-up and ramp included): a start that found no free slot on the
      // instance's worker went through the task queue (EVENTMESH_AGENTS_WORKER_SLOTS).
      const meshStarts = (
        (await (await fetch(`${instance.url}/health`)).json()) as {
          stats?: { a2aWorkflowStarts?: { total: number; eager: number } };
        }
      ).stats?.a2aWorkflowStarts;
      console.log(
        `(3)'s task workflows started eagerly: ${meshStarts ? `${meshStarts.eager} of ${meshStarts.total}` : 'not reported by /health'}`,
      );
      console.log(`errors (tasks not answered as sent, or past ${OP_TIMEOUT_MS} ms): ${errors}`);

      // Where a mesh task's time goes: its workflow's history (Temporal's event times), against the client's view.
      const sample = mid.half.mesh.taskIds.slice(-TIMELINE_SAMPLE);
      const timeline = await medianTimeline(temporal, sample);
      console.log(
        `\nA mesh task's workflow at half load (median event times after the workflow's start, ${timeline.of} of ${timeline.sampled} sampled histories of this shape); the client's p50 was ${f(p(mid.half.mesh, 50))} ms:`,
      );
      for (const s of timeline.steps) console.log(`  ${f(s.ms)} ms  ${s.label}`);
      const sum = summarize(timeline.steps);
      const workflowMs = timeline.steps.at(-1)?.ms ?? NaN;
      console.log(
        `  in sum: waiting in Temporal's queues for a worker ${f(sum.queued)} ms (${sum.workflowTasks} workflow tasks, ${sum.activities} activities), ` +
          `the worker's workflow tasks ${f(sum.workflowTaskRun)} ms, the activities ${f(sum.activityRun)} ms, ` +
          `the client's p50 answer ${f(Math.abs(p(mid.half.mesh, 50) - workflowMs))} ms ${p(mid.half.mesh, 50) >= workflowMs ? 'after' : 'before'} the workflow's median end ` +
          `(a blocking send is answered as soon as the delivery records the settled task, which the gateway's first attempt usually does before the workflow task running it completes)`,
      );
    }

    const register = async (card: Record<string, unknown>) => {
      const replaced = await fetch(`${instance.url}/a2a/agents/${agentName}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(card),
      });
      if (replaced.status !== 200)
        throw new Error(`registering the burst's agent: ${replaced.status} ${await replaced.text()}`);
    };
    if (PHASES.includes('burst'))
      await runBurst({
        run,
        mesh,
        agentName,
        register,
        postgres: config.postgres,
        stopping,
        budgetLeft,
        opTimeoutMs: OP_TIMEOUT_MS,
      });
    await fetch(`${instance.url}/a2a/agents/${agentName}`, { method: 'DELETE' });
  } finally {
    await instanceB?.stop();
    await instance.stop();
    await endTaskWorkflows(temporal, agentName);
    worker.shutdown();
    await workerRun.catch(() => undefined);
    await workerConnection.close();
    await connection.close();
    await agent.kill();
    const admin = kafka.admin();
    await admin.connect();
    await admin
      .deleteTopics({ topics: [`bench-a2a-${run}`, requestTopicOf('default', agentName)] })
      .catch(() => undefined);
    await admin.disconnect();
  }
}

// Interrupted (Ctrl-C, a timeout): the run stops where it is and still cleans up (instance, workflows, topics).
let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    console.error(`${signal}: stopping the run`);
    stopRequested.abort();
  });
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
