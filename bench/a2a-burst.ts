import { TaskState, taskStateToJSON } from '@a2a-js/sdk';
import type { Client as A2AClient } from '@a2a-js/sdk/client';
import { Client as PgClient, ClientConfig } from 'pg';
import { EchoAgentProcess } from './a2a-agent-process';
import { echoRequest, textOf } from './a2a-echo-agent';
import { sleep, until } from './support';

/**
 * The burst of `npm run bench:a2a`: BENCH_BURST_TASKS (1,000) non-blocking sends (`returnImmediately`) through the
 * mesh, BENCH_BURST_CONCURRENCY (32) at a time, to the echo agent in a process of its own; once it has answered half
 * of them its process is SIGKILLed, and a new one listens on the same port BENCH_AGENT_DOWN_MS (3,000) later. Every
 * task the mesh acknowledged must reach `completed` (read back with `GetTask`, within BENCH_BURST_SETTLE_MS) with
 * its own text, completed once by the mesh (one `completed` status in its event log); the texts the agent did more
 * than once (it forgot them when killed, and was sent them again) are counted beside.
 */
const BURST = Number(process.env.BENCH_BURST_TASKS ?? 1000);
const BURST_CONCURRENCY = Number(process.env.BENCH_BURST_CONCURRENCY ?? 32);
const DOWN_MS = Number(process.env.BENCH_AGENT_DOWN_MS ?? 3000);
/** How long the burst's tasks may take to settle after the last send (the run's task timeout is set past it). */
export const BURST_SETTLE_MS = Number(process.env.BENCH_BURST_SETTLE_MS ?? 120000);
const TERMINAL: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

interface BurstTask {
  text: string;
  taskId?: string;
  refusal?: string;
  state?: TaskState;
  echoed?: string;
}

/** What the burst needs of the run (bench/a2a.bench.ts). */
export interface BurstRun {
  /** The run's id: the burst's texts are `burst-<run>-<n>`. */
  run: string;
  /** The stock client of the run's agent, through the mesh. */
  mesh: A2AClient;
  agentName: string;
  /** Registers a card under the run's agent name, in place of the one registered. */
  register(card: Record<string, unknown>): Promise<void>;
  /** Where the mesh's task event logs are (the burst counts their completions). */
  postgres: ClientConfig;
  /** The run was interrupted (SIGINT, SIGTERM): every wait ends. */
  stopping(): boolean;
  /** How long the run may still go on before its cleanup. */
  budgetLeft(): number;
  /** The deadline of one send. */
  opTimeoutMs: number;
}

/**
 * The burst's agent is the echo agent in a process of its own (bench/a2a-agent-process.ts), registered under the
 * run's agent name in place of the in-process one: its kill is a SIGKILL of that process.
 */
export async function runBurst(r: BurstRun): Promise<void> {
  const agent = new EchoAgentProcess(r.agentName);
  try {
    await agent.start();
    await r.register(await agent.card());
    await burstAgainst(agent, r);
  } finally {
    await agent.close();
  }
}

async function burstAgainst(
  agent: EchoAgentProcess,
  { run, mesh, postgres, stopping, budgetLeft, opTimeoutMs }: BurstRun,
): Promise<void> {
  const checkStop = () => {
    if (stopping()) throw new Error('interrupted');
  };
  const prefix = `burst-${run}-`;
  const tasks: BurstTask[] = Array.from({ length: BURST }, (_, n) => ({ text: `${prefix}${n}` }));
  const answeredBefore = () => [...agent.answered().keys()].filter((t) => t.startsWith(prefix)).length;
  console.log(
    `\nburst: ${BURST} non-blocking sends through the mesh, ${BURST_CONCURRENCY} at a time; the agent's process SIGKILLed once it answered ${Math.floor(BURST / 2)}, started again ${DOWN_MS} ms later`,
  );
  const startedAt = Date.now();
  let next = 0;
  const sending = Promise.all(
    Array.from({ length: BURST_CONCURRENCY }, async () => {
      for (let n = next++; n < BURST && !stopping(); n = next++) {
        const task = tasks[n];
        try {
          const answer = await mesh.sendMessage(echoRequest(task.text, true), {
            signal: AbortSignal.timeout(opTimeoutMs),
          });
          if ('status' in answer && answer.id) task.taskId = answer.id;
          else task.refusal = 'answered without a task';
        } catch (e) {
          task.refusal = (e as Error).message.slice(0, 120);
        }
      }
    }),
  );
  // The kill: once the agent has answered half of the burst (bounded: the sends may outrun the deliveries).
  await until(
    'the agent to answer half of the burst',
    () => (answeredBefore() >= BURST / 2 || stopping() ? true : undefined),
    Math.max(1000, budgetLeft() - DOWN_MS),
    5,
  ).catch(() => console.log(`  the agent had not answered half of the burst by the run's bound: killed now`));
  checkStop();
  const killedAt = Date.now();
  const answeredAtKill = answeredBefore();
  const ackedAtKill = tasks.filter((t) => t.taskId).length;
  await agent.kill();
  await sleep(DOWN_MS);
  await agent.start();
  const backAt = Date.now();
  await sending;
  const sentMs = Date.now() - startedAt;
  console.log(
    `  killed ${killedAt - startedAt} ms into the burst (the agent had answered ${answeredAtKill}, the mesh acknowledged ${ackedAtKill} sends), a new process listening after ${backAt - killedAt} ms; every send answered after ${sentMs} ms`,
  );

  // Every acknowledged task read back until it is terminal (GetTask through the mesh), bounded.
  const acknowledged = tasks.filter((t) => t.taskId);
  const open = () => acknowledged.filter((t) => !TERMINAL.has(t.state ?? TaskState.TASK_STATE_UNSPECIFIED));
  const deadline = Date.now() + Math.min(BURST_SETTLE_MS, budgetLeft());
  while (open().length > 0 && Date.now() < deadline && !stopping()) {
    const batch = open();
    let i = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let k = i++; k < batch.length; k = i++) {
          const t = batch[k];
          try {
            const task = await mesh.getTask(
              { tenant: '', id: t.taskId!, historyLength: 0 },
              { signal: AbortSignal.timeout(10000) },
            );
            t.state = task.status?.state;
            t.echoed = task.artifacts.map((a) => textOf(a)).join('');
          } catch {
            // read again next time
          }
        }
      }),
    );
    if (open().length > 0) await sleep(500);
  }
  checkStop();
  const settledMs = Date.now() - startedAt;
  const completed = acknowledged.filter((t) => t.state === TaskState.TASK_STATE_COMPLETED);
  const wrongEcho = completed.filter((t) => t.echoed !== t.text);
  const states: Record<string, number> = {};
  for (const t of acknowledged) {
    const s = taskStateToJSON(t.state ?? TaskState.TASK_STATE_UNSPECIFIED);
    states[s] = (states[s] ?? 0) + 1;
  }
  const refusals: Record<string, number> = {};
  for (const t of tasks.filter((x) => x.refusal)) refusals[t.refusal!] = (refusals[t.refusal!] ?? 0) + 1;
  const answered = agent.answered();
  const atAgent = tasks.filter((t) => (answered.get(t.text) ?? 0) > 0).length;
  const duplicates = [...answered].filter(([text, n]) => text.startsWith(prefix) && n > 1);
  const completionsInMesh = await completionsRecorded(
    postgres,
    acknowledged.map((t) => t.taskId!),
  );
  const twiceInMesh = [...completionsInMesh.values()].filter((n) => n > 1).length;
  const stillOpen = open().length;
  const lost = acknowledged.length - completed.length - stillOpen;
  console.log(
    `  sent ${BURST}: acknowledged ${acknowledged.length}, refused ${BURST - acknowledged.length}${Object.keys(refusals).length > 0 ? ` ${JSON.stringify(refusals)}` : ''}`,
  );
  console.log(
    `  acknowledged tasks by state after ${settledMs} ms: ${JSON.stringify(states)}; completed with the text sent: ${completed.length - wrongEcho.length}`,
  );
  console.log(
    `  the mesh recorded a completion of ${completionsInMesh.size} tasks, of none more than once: ${twiceInMesh === 0 ? 'yes' : `no (${twiceInMesh} twice)`} (each task's event log in Postgres)`,
  );
  console.log(
    `  the agent completed ${atAgent} distinct tasks of the burst; more than once: ${duplicates.length}${
      duplicates.length > 0
        ? ` (${duplicates
            .slice(0, 5)
            .map(([t, n]) => `${t} x${n}`)
            .join(', ')}: ` +
          'tasks the agent had done and forgot when its process was killed, before the mesh heard of them, sent to it again: at least once, docs/a2a.md, "Not supported")'
        : ''
    }`,
  );
  if (stillOpen > 0)
    console.log(
      `  still open when the run's bound came (BENCH_BUDGET_SECONDS, BENCH_BURST_SETTLE_MS): ${stillOpen}, neither lost nor completed yet`,
    );
  const verdict =
    lost > 0 || wrongEcho.length > 0 || twiceInMesh > 0 || completionsInMesh.size !== completed.length
      ? 'NOT met'
      : stillOpen > 0
        ? 'not shown (tasks still open at the bound)'
        : 'met';
  console.log(
    `  lost (acknowledged, ended other than completed): ${lost}; goal 0 lost and each completed once (by the mesh): ${verdict}; each done once by the agent too: ${duplicates.length === 0 ? 'yes' : 'no'}`,
  );
}

/** How many completions the mesh recorded for each task (`completed` status events in its event log, Postgres). */
async function completionsRecorded(postgres: ClientConfig, taskIds: string[]): Promise<Map<string, number>> {
  const db = new PgClient(postgres);
  await db.connect();
  try {
    const { rows } = await db.query<{ task_id: string; n: number }>(
      `SELECT task_id, count(*)::int AS n FROM a2a_task_events
        WHERE task_id = ANY($1::text[]) AND kind = 'status-update' AND payload->'status'->>'state' = 'TASK_STATE_COMPLETED'
        GROUP BY task_id`,
      [taskIds],
    );
    return new Map(rows.map((r) => [r.task_id, r.n]));
  } finally {
    await db.end();
  }
}
