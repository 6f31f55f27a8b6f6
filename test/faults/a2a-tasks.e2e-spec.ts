import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SendMessageRequest, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import { Client, ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import ts from 'typescript';
import { requestTopicOf } from '@libs/a2a';
import { a2aTaskWorkflowIdOf } from '../../workflows';
import { EchoAgent } from '../support/a2a-echo-agent';
import { WebhookReceiver } from '../support/webhook-receiver';
import { parsePrometheusText } from '../support/prometheus-text';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import {
  endDispatchWorkflows,
  FaultInstance,
  KAFKA_FAULTS_ADVERTISED_PORT,
  KAFKA_FAULTS_TARGET,
  queryPostgres,
} from './cluster';
import { FaultProxy } from './fault-proxy';
import { reportRow } from './report';

/** Sends per second, and how long the agent works on each task (so that tasks are in flight when the link is cut). */
const RATE = 8;
const WORK_MS = 2000;
const CUT_MS = 5000;
/** Client deadline of one send; no answer by then is not an acknowledgement. */
const SEND_TIMEOUT_MS = 10000;
const TERMINAL: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);
/** The tenant of the anonymous caller (the fault instances run without a gate). */
const TENANT = 'default';

interface Sent {
  text: string;
  startedAt: number;
  answeredAt?: number;
  /** The mesh's task id: the send was acknowledged. */
  taskId?: string;
  /** Why the send was not acknowledged (an error the client got, or no answer). */
  refusal?: string;
}

/** What a refused send got, with ids and figures taken out, to count alike refusals together. */
function refusalOf(e: unknown): string {
  const error = e as Error;
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return `no answer in ${SEND_TIMEOUT_MS} ms`;
  const status = /\b(4\d\d|5\d\d)\b/.exec(error.message)?.[1];
  const code = /"code":\s*"([A-Z_]+)"/.exec(error.message)?.[1];
  return status
    ? `HTTP ${status}${code ? ` ${code}` : ''}`
    : `${error.constructor.name}: ${error.message.replace(/[0-9a-f-]{36}/g, '<id>').slice(0, 80)}`;
}

/** A task workflow's status and pending activity as the Temporal server has them (attempt, state, last failure). */
async function describeDelivery(taskId: string): Promise<string> {
  const { client, close } = await temporalClient();
  try {
    const d = await client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).describe();
    const a = d.raw.pendingActivities?.[0];
    return JSON.stringify({
      status: d.status.name,
      activity: a?.activityType?.name,
      attempt: a?.attempt,
      state: a?.state,
      lastFailure: a?.lastFailure?.message,
      lastWorker: a?.lastWorkerIdentity,
    });
  } finally {
    await close();
  }
}

/** A2A sends at a steady rate (each one not waiting for the one before), every answer recorded. */
class SendLoad {
  readonly sent: Sent[] = [];
  private timer?: NodeJS.Timeout;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly client: Client,
    /** The text of the n-th send (what the agent is asked to do). */
    private readonly textOf: (n: number) => string,
    readonly rate = RATE,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.sendOne(), 1000 / this.rate);
  }

  private sendOne(): void {
    const entry: Sent = { text: this.textOf(this.sent.length), startedAt: Date.now() };
    this.sent.push(entry);
    const request = SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: entry.text }] },
      configuration: { returnImmediately: true },
    });
    const sending = this.client
      .sendMessage(request, { signal: AbortSignal.timeout(SEND_TIMEOUT_MS) })
      .then(
        (answer) => {
          // Acknowledged: the mesh answered the task it took (returnImmediately: `submitted`, with its id).
          if ('status' in answer && answer.id) entry.taskId = answer.id;
          else entry.refusal = 'answered without a task';
        },
        (e: unknown) => {
          entry.refusal = refusalOf(e);
        },
      )
      .finally(() => {
        entry.answeredAt = Date.now();
        this.inFlight.delete(sending);
      });
    this.inFlight.add(sending);
  }

  /** Stops sending; resolves once every send has its answer (bounded by the send deadline). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.inFlight]);
  }

  acknowledged(): Sent[] {
    return this.sent.filter((s) => s.taskId);
  }

  async acknowledgedAtLeast(count: number, timeoutMs: number): Promise<void> {
    await waitFor(`${count} sends acknowledged`, () => this.acknowledged().length >= count, { timeoutMs });
  }

  /** The refusals, counted by kind. */
  refusals(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const s of this.sent) if (s.refusal) counts[s.refusal] = (counts[s.refusal] ?? 0) + 1;
    return counts;
  }
}

/** What became of the acknowledged sends: each task's state once all are terminal (or the bound passed). */
interface Outcome {
  acknowledged: Sent[];
  completed: number;
  lost: number;
  /** Acknowledged tasks that did not complete, by state. */
  notCompleted: Record<string, number>;
  ended: boolean;
  /** From `sinceMs` (the heal, the kill) to every task terminal (or the bound). */
  endedMs: number;
  /** What Temporal says of one task that did not complete ('none' when all did). */
  stuck: string;
}

/**
 * One row of the failure table for a case of A2A sends: the lines every case prints (sends, refusals, how the
 * acknowledged tasks ended, one that did not, what the instance logged) around the case's own, and the columns.
 */
function reportTasks(
  title: string,
  c: {
    sends: SendLoad;
    outcome: Outcome;
    duplicates: number;
    instance: { id: string; warnings(): Record<string, number> };
    since: string;
    lines: string[];
    summary: string;
  },
): void {
  const refusals = c.sends.refusals();
  reportRow(
    title,
    [
      `sends ${c.sends.sent.length}; acknowledged ${c.outcome.acknowledged.length}; refused ${JSON.stringify(refusals)}`,
      ...c.lines,
      `every acknowledged task terminal: ${c.outcome.ended} (${c.outcome.endedMs} ms after the ${c.since}); not completed: ${JSON.stringify(c.outcome.notCompleted)}`,
      `a task not completed: ${c.outcome.stuck}`,
      `${c.instance.id}: logged ${JSON.stringify(c.instance.warnings())}`,
    ].join('\n'),
    [
      c.outcome.acknowledged.length,
      c.outcome.completed,
      c.outcome.lost,
      c.duplicates,
      '-',
      JSON.stringify({ acknowledged: c.outcome.acknowledged.length, ...refusals }),
      c.summary,
    ],
  );
}

/** Reads every acknowledged task (GetTask) until all are terminal, bounded by `timeoutMs`. */
async function outcomeOf(client: Client, load: SendLoad, sinceMs: number, timeoutMs = 45000): Promise<Outcome> {
  const acknowledged = load.acknowledged();
  const states = new Map<string, TaskState | undefined>();
  const open = () =>
    acknowledged.filter((s) => !TERMINAL.has(states.get(s.taskId!) ?? TaskState.TASK_STATE_UNSPECIFIED));
  const ended = await waitFor(
    'every acknowledged task in a terminal state',
    async () => {
      for (const s of open()) {
        const task = await client.getTask(
          { tenant: '', id: s.taskId!, historyLength: 0 },
          { signal: AbortSignal.timeout(5000) },
        );
        states.set(s.taskId!, task.status?.state);
      }
      return open().length === 0;
    },
    { timeoutMs, intervalMs: 500 },
  ).catch(() => false);
  const endedMs = Date.now() - sinceMs;
  const notCompleted: Record<string, number> = {};
  for (const s of acknowledged) {
    if (states.get(s.taskId!) === TaskState.TASK_STATE_COMPLETED) continue;
    const state = taskStateToJSON(states.get(s.taskId!) ?? TaskState.TASK_STATE_UNSPECIFIED);
    notCompleted[state] = (notCompleted[state] ?? 0) + 1;
  }
  const completed = acknowledged.filter((s) => states.get(s.taskId!) === TaskState.TASK_STATE_COMPLETED).length;
  const stuckOne = acknowledged.find((s) => states.get(s.taskId!) !== TaskState.TASK_STATE_COMPLETED);
  const stuck = stuckOne ? await describeDelivery(stuckOne.taskId!).catch((e: Error) => e.message) : 'none';
  return {
    acknowledged,
    completed,
    lost: acknowledged.length - completed,
    notCompleted,
    ended: ended === true,
    endedMs,
    stuck,
  };
}

/** How many times each text (one per task) came more than once: the duplicates at the agent. */
function duplicatesOf(received: string[]): { receipts: Map<string, number>; duplicated: number; duplicates: number } {
  const receipts = new Map<string, number>();
  for (const text of received) receipts.set(text, (receipts.get(text) ?? 0) + 1);
  const more = [...receipts.values()].filter((n) => n > 1);
  return { receipts, duplicated: more.length, duplicates: more.reduce((sum, n) => sum + n - 1, 0) };
}

/** The replica script (a2a-replica.ts) transpiled to JavaScript in a temporary folder, once: `node` runs it. */
let replicaScript: string | undefined;
function replicaScriptPath(): string {
  if (replicaScript) return replicaScript;
  const source = readFileSync(path.join(__dirname, 'a2a-replica.ts'), 'utf8');
  const js = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  replicaScript = path.join(mkdtempSync(path.join(tmpdir(), 'a2a-replica-')), 'a2a-replica.js');
  writeFileSync(replicaScript, js);
  return replicaScript;
}

/** A line a replica printed (a2a-replica.ts). */
interface ReplicaLine {
  replica: string;
  at: number;
  event: 'polling' | 'received' | 'ended' | 'completing' | 'completed' | 'failed' | 'answered' | 'poll-failed';
  task?: string;
  status?: number;
  state?: string;
  acked?: string[];
}

/** One replica of a mesh-subscriber agent as its own process (test/faults/a2a-replica.ts), its lines parsed. */
class Replica {
  readonly lines: ReplicaLine[] = [];
  private readonly child: ChildProcess;
  private stderr = '';
  private readonly exited: Promise<void>;

  constructor(
    readonly name: string,
    settings: { mesh: string; agent: string; subscription: string; window: number; workMs: number; ackEveryMs: number },
  ) {
    this.child = spawn(process.execPath, [replicaScriptPath()], {
      env: {
        PATH: process.env.PATH ?? '',
        REPLICA_MESH_URL: settings.mesh,
        REPLICA_AGENT: settings.agent,
        REPLICA_SUBSCRIPTION: settings.subscription,
        REPLICA_NAME: name,
        REPLICA_WINDOW: String(settings.window),
        REPLICA_WORK_MS: String(settings.workMs),
        REPLICA_ACK_EVERY_MS: String(settings.ackEveryMs),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let partial = '';
    this.child.stdout!.on('data', (d: Buffer) => {
      const text = partial + d.toString();
      const lines = text.split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (line.startsWith('{')) this.lines.push(JSON.parse(line) as ReplicaLine);
    });
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Tasks it received and has not finished (completed, or found ended). */
  unfinished(): string[] {
    const finished = new Set(
      this.lines.filter((l) => l.event === 'completed' || l.event === 'ended').map((l) => l.task),
    );
    return this.lines.filter((l) => l.event === 'received' && !finished.has(l.task)).map((l) => l.task!);
  }

  /** Tasks it completed (200) and has not acked yet. */
  completedUnacked(): string[] {
    const acked = new Set(
      this.lines.filter((l) => l.event === 'answered' && l.status === 200).flatMap((l) => l.acked ?? []),
    );
    return this.lines
      .filter((l) => l.event === 'completed' && l.status === 200 && !acked.has(l.task!))
      .map((l) => l.task!);
  }

  async kill(): Promise<void> {
    if (this.running) this.child.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    if (this.running) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(timer);
  }

  output(): string {
    return `${this.lines.map((l) => JSON.stringify(l)).join('\n')}\n${this.stderr}`;
  }
}

type Link = 'postgres' | 'kafka' | 'temporal';

/**
 * The tasks store under faults (docs/failure-matrix.md, the row of `a2a_tasks`). Each case runs one instance
 * process and A2A sends through the SDK's client (`returnImmediately`), and counts alike: sends acknowledged
 * (answered with a task id), tasks `completed` (GetTask), lost (acknowledged, not completed: must be 0), tasks the
 * agent received more than once, and refusals.
 * - Link cuts (Postgres, Kafka, Temporal): a loopback A2A agent at a URL works 2 s on each task, sends come at
 *   8/s; the instance's link to one server goes through a fault proxy and is cut for 5 s (open connections
 *   dropped, new ones closed), then healed. Every acknowledged task must complete (the tasks in flight at the cut
 *   included), and a send the mesh could not take must be refused with an error.
 * - A mesh-subscriber agent of two replicas (long-poll, LOAD_BALANCE), each its own process; one is SIGKILLed
 *   with tasks in hand. Every acknowledged task must be completed exactly once.
 */
describe('faults: A2A tasks', () => {
  const runId = randomUUID().slice(0, 8);
  const baseEnv = {
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
    EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
    EVENTMESH_AGENTS_CALL_TIMEOUT_MS: '2000',
    // Well past the run: a task that does not complete is lost here, not failed by its deadline.
    EVENTMESH_AGENTS_TASK_TIMEOUT_MS: '120000',
  };
  /** What a case started, ended after it. */
  let instance: FaultInstance | undefined;
  let kafka: FaultProxy | undefined;
  let load: SendLoad | undefined;
  let agent: EchoAgent | undefined;
  let replicas: Replica[] = [];
  let taskIds: string[] = [];

  afterAll(() => {
    if (replicaScript) rmSync(path.dirname(replicaScript), { recursive: true, force: true });
  });

  afterEach(async () => {
    await load?.stop();
    for (const r of replicas) await r.stop();
    await instance?.stop();
    await kafka?.stop();
    if (process.env.FAULTS_LOG_DIR) {
      if (instance) writeFileSync(path.join(process.env.FAULTS_LOG_DIR, `${instance.id}.log`), instance.output());
      for (const r of replicas)
        writeFileSync(path.join(process.env.FAULTS_LOG_DIR, `${instance?.id}-${r.name}.log`), r.output());
    }
    await agent?.close();
    const ids = [...taskIds, ...(load?.acknowledged() ?? []).map((s) => s.taskId!)];
    const { client, close } = await temporalClient();
    try {
      await terminateWorkflows(client, ids.map(a2aTaskWorkflowIdOf));
    } finally {
      await close();
    }
    if (instance) await endDispatchWorkflows(instance.options.env, [instance.id]);
    [instance, kafka, load, agent, replicas, taskIds] = [undefined, undefined, undefined, undefined, [], []];
  });

  /** The case's instance, its link to `link` through a fault proxy (Kafka: the shared fault listener's proxy). */
  const startInstance = async (name: string, link?: Link): Promise<FaultInstance> => {
    if (link === 'kafka') {
      kafka = new FaultProxy(KAFKA_FAULTS_TARGET.host, KAFKA_FAULTS_TARGET.port, {
        listenPort: KAFKA_FAULTS_ADVERTISED_PORT,
      });
      await kafka.start();
    }
    instance = new FaultInstance({
      id: `faults-a2a-${runId}-${name}`,
      env: { ...baseEnv, EVENTMESH_KAFKA_TOPICS: `faults-a2a-${runId}-${name}` },
      proxyPostgres: link === 'postgres',
      proxyTemporal: link === 'temporal',
      kafkaProxy: kafka,
    });
    await instance.start();
    return instance;
  };

  const register = async (
    at: FaultInstance,
    name: string,
    card: Record<string, unknown>,
    style = 'url',
  ): Promise<void> => {
    const put = await fetch(`${at.url}/a2a/agents/${name}?style=${style}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(card),
      signal: AbortSignal.timeout(20000),
    });
    expect(put.status).toBe(201);
  };

  const clientOf = (at: FaultInstance, name: string): Promise<Client> =>
    new ClientFactory({
      transports: [new JsonRpcTransportFactory()],
      cardResolver: new DefaultAgentCardResolver(),
    }).createFromUrl(`${at.url}/a2a/agents/${name}/.well-known/agent-card.json`, '');

  /**
   * The link to `link` cut for 5 s under the load of sends, then healed: every acknowledged task completes (those
   * in flight at the agent when the link was cut included), and what the sends started during the cut got.
   */
  const linkCut = async (link: Link) => {
    const at = await startInstance(link, link);
    agent = new EchoAgent();
    await agent.start();
    const agentName = `echo-${runId}-${link}`;
    await register(at, agentName, agent.card());
    const client = await clientOf(at, agentName);

    const sends = new SendLoad(client, (n) => `work:${WORK_MS}:${runId}-${n}`);
    load = sends;
    const loadStartedAt = Date.now();
    sends.start();
    // 3 s of load: with 2 s of work per task, about 16 tasks are in flight at the agent when the link is cut.
    await sends.acknowledgedAtLeast(3 * RATE, 60000);
    const proxy = { postgres: at.postgres, kafka, temporal: at.temporal }[link]!;
    proxy.cut();
    const cutAt = Date.now();
    await waitFor(`${CUT_MS} ms of cut`, () => Date.now() - cutAt >= CUT_MS, { timeoutMs: CUT_MS + 5000 });
    proxy.heal();
    const healedAt = Date.now();
    const acknowledgedAtHeal = sends.acknowledged().length;
    // Sends are taken again after the heal: 5 s more of load.
    await sends.acknowledgedAtLeast(acknowledgedAtHeal + 5 * RATE, 30000);
    await sends.stop();
    const loadMs = Date.now() - loadStartedAt;

    const outcome = await outcomeOf(client, sends, healedAt);
    const { receipts, duplicated, duplicates } = duplicatesOf(agent.received);
    const startedInCut = sends.sent.filter((s) => s.startedAt >= cutAt && s.startedAt < healedAt);
    const refusedInCut = startedInCut.filter((s) => s.refusal);
    const acknowledgedInCut = startedInCut.filter((s) => s.taskId);
    const answeredInCut = (sent: Sent[]) =>
      sent.length === 0
        ? '-'
        : `${Math.min(...sent.map((s) => s.answeredAt! - s.startedAt))}-${Math.max(...sent.map((s) => s.answeredAt! - s.startedAt))} ms`;
    // Acknowledged within the agent's working time before the cut: in flight at the agent when the link was cut.
    const inFlightAtCut = outcome.acknowledged.filter(
      (s) => s.answeredAt! > cutAt - WORK_MS && s.answeredAt! <= cutAt,
    ).length;
    const takenThoughRefused = sends.sent.filter((s) => s.refusal && receipts.has(s.text)).length;

    const label = { postgres: 'Postgres', kafka: 'Kafka', temporal: 'Temporal' }[link];
    reportTasks(
      `A2A tasks: ${label} link cut ${CUT_MS / 1000} s (proxy) under ${RATE} sends/s, agent works ${WORK_MS / 1000} s per task; 1 instance`,
      {
        sends,
        outcome,
        duplicates,
        instance: at,
        since: 'heal',
        lines: [
          `sent in ${loadMs} ms; started during the cut: ${startedInCut.length}; refused ${refusedInCut.length} (answered in ${answeredInCut(refusedInCut)}); acknowledged ${acknowledgedInCut.length} (answered in ${answeredInCut(acknowledgedInCut)}, the last ${acknowledgedInCut.length === 0 ? '-' : Math.max(...acknowledgedInCut.map((s) => s.answeredAt! - healedAt))} ms after the heal); in flight at the cut: ${inFlightAtCut}`,
          `agent received ${agent.received.length} (${receipts.size} distinct; ${duplicated} more than once); refused sends the agent got anyway: ${takenThoughRefused}`,
        ],
        summary: `in flight at the cut ${inFlightAtCut}; all ended ${outcome.endedMs} ms after the heal`,
      },
    );

    // The fault took effect: tasks were in flight when it came, sends were started during it and none of them was
    // acknowledged before the heal.
    expect(inFlightAtCut).toBeGreaterThan(0);
    expect(startedInCut.length).toBeGreaterThan(0);
    expect(acknowledgedInCut.filter((s) => s.answeredAt! < healedAt)).toEqual([]);
    // Nothing acknowledged is lost: every task answered with an id completed.
    expect(outcome.notCompleted).toEqual({});
    expect(outcome.lost).toBe(0);
    expect(at.process!.child.exitCode).toBeNull();
    return { startedInCut, healedAt };
  };

  it('Postgres link cut 5 s under a load of sends: every acknowledged task completes, a send not taken is refused with an error', async () => {
    const { startedInCut } = await linkCut('postgres');
    // A send is recorded in Postgres first: in the cut, the mesh cannot record the task and refuses it (503).
    const refused = startedInCut.filter((s) => s.refusal);
    expect(refused.length).toBeGreaterThan(0);
    expect([...new Set(refused.map((s) => s.refusal))]).toEqual(['HTTP 503 DEPENDENCY_UNAVAILABLE']);
  }, 240000);

  it('Kafka link cut 5 s under a load of sends: every acknowledged task completes, a send not taken is refused with an error', async () => {
    const { startedInCut } = await linkCut('kafka');
    // A send's request is written to Kafka before it is answered: in the cut, the write times out and the send is
    // refused as /events/publish is, 503 KAFKA_UNAVAILABLE (with Retry-After), not as an internal error.
    const refused = startedInCut.filter((s) => s.refusal);
    expect(refused.length).toBeGreaterThan(0);
    expect([...new Set(refused.map((s) => s.refusal))]).toEqual(['HTTP 503 KAFKA_UNAVAILABLE']);
  }, 240000);

  it('Temporal link cut 5 s under a load of sends: every acknowledged task completes, a send in the cut waits for Temporal', async () => {
    const { startedInCut, healedAt } = await linkCut('temporal');
    // A send is answered once its workflow started: in the cut it waits (the Temporal client retries the start), and
    // is answered after the heal, or not within the client's deadline; never before the heal.
    expect(startedInCut.filter((s) => s.answeredAt! < healedAt)).toEqual([]);
  }, 240000);

  it('an instance delivering to an agent at a URL SIGKILLed with tasks in hand: another instance completes every acknowledged task', async () => {
    const victim = await startInstance('killed');
    const survivor = new FaultInstance({
      id: `faults-a2a-${runId}-survivor`,
      env: { ...baseEnv, EVENTMESH_KAFKA_TOPICS: `faults-a2a-${runId}-killed` },
    });
    await survivor.start();
    try {
      agent = new EchoAgent();
      await agent.start();
      const agentName = `echo-${runId}-killed`;
      await register(victim, agentName, agent.card());
      // Sends through the victim: with eager start, its own worker runs each task's first attempt (a local activity
      // within the first workflow task) and, for these 2 s tasks, the delivery activity that follows them.
      const sends = new SendLoad(await clientOf(victim, agentName), (n) => `work:${WORK_MS}:${runId}-k${n}`);
      load = sends;
      const loadStartedAt = Date.now();
      sends.start();
      await sends.acknowledgedAtLeast(3 * RATE, 60000);
      await victim.kill();
      const killedAt = Date.now();
      await sends.stop();
      const loadMs = Date.now() - loadStartedAt;
      // Acknowledged within the agent's working time before the kill: in flight at the agent when it came.
      const inFlightAtKill = sends
        .acknowledged()
        .filter((s) => s.answeredAt! > killedAt - WORK_MS && s.answeredAt! <= killedAt).length;

      const outcome = await outcomeOf(await clientOf(survivor, agentName), sends, killedAt, 90000);
      const { duplicated, duplicates } = duplicatesOf(agent.received);
      reportTasks(
        `A2A tasks: the instance delivering to an agent at a URL SIGKILLed under ${RATE} sends/s, agent works ${WORK_MS / 1000} s per task; a second instance`,
        {
          sends,
          outcome,
          duplicates,
          instance: survivor,
          since: 'kill',
          lines: [
            `sent through the victim in ${loadMs} ms; in flight at the agent at the kill: ${inFlightAtKill}`,
            `agent received ${agent.received.length} (${duplicated} tasks more than once: sent again by a delivery that died before it recorded the agent's answer)`,
          ],
          summary: `in flight at the kill ${inFlightAtKill}; all ended ${outcome.endedMs} ms after the kill`,
        },
      );

      expect(inFlightAtKill).toBeGreaterThan(0);
      // Nothing acknowledged is lost: the survivor's worker took over the tasks the victim was running.
      expect(outcome.notCompleted).toEqual({});
      expect(outcome.lost).toBe(0);
      expect(survivor.process!.child.exitCode).toBeNull();
    } finally {
      await survivor.stop();
      await endDispatchWorkflows(survivor.options.env, [survivor.id]);
    }
  }, 240000);

  it("a worker SIGKILLed while it pushes a task's completion: another instance pushes it again (same webhook-id) and records it pushed", async () => {
    // Signed pushes: the Standard Webhooks headers carry the push's id (webhook-id), the same on every attempt.
    const env = {
      ...baseEnv,
      EVENTMESH_KAFKA_TOPICS: `faults-a2a-${runId}-push-killed`,
      EVENTMESH_AGENTS_PUSH_SIGNING_SECRET: `whsec_${randomBytes(32).toString('base64')}`,
    };
    const victim = (instance = new FaultInstance({ id: `faults-a2a-${runId}-push-killed`, env }));
    await victim.start();
    const survivor = new FaultInstance({ id: `faults-a2a-${runId}-push-survivor`, env });
    const receiver = new WebhookReceiver();
    await receiver.start();
    let answer: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (answer = resolve));
    try {
      agent = new EchoAgent();
      await agent.start();
      const agentName = `echo-${runId}-push`;
      await register(victim, agentName, agent.card());
      const key = randomUUID();
      const sent = await (
        await clientOf(victim, agentName)
      ).sendMessage(
        SendMessageRequest.fromJSON({
          message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: `hold:${key}` }] },
          configuration: {
            returnImmediately: true,
            taskPushNotificationConfig: { url: receiver.url!, token: 'crash' },
          },
        }),
      );
      const taskId = (sent as { id: string }).id;
      taskIds.push(taskId);
      // The receiver takes the first push of the completion and never answers it: the push is in flight, on the
      // victim (the only worker yet), when the victim is killed.
      const completions = () =>
        receiver.requests.filter(
          (r) =>
            String(r.headers['webhook-id'] ?? '').startsWith(`${taskId}:`) &&
            r.body.toString('utf8').includes('TASK_STATE_COMPLETED'),
        );
      receiver.gate = (r) => (completions().length === 1 && completions()[0] === r ? held : undefined);
      await waitFor('the agent holding the task', () => agent!.isHeld(key), { timeoutMs: 60000 });
      agent.release(key);
      const [first] = await waitFor(
        'the completion push taken by the receiver',
        () => completions().length === 1 && completions(),
        { timeoutMs: 60000 },
      );
      await victim.kill();
      const killedAt = Date.now();
      await survivor.start();
      // Temporal runs the push activity again on the survivor once the victim's heartbeats stop (10 s).
      const again = await waitFor('the completion pushed again', () => completions().length >= 2 && completions(), {
        timeoutMs: 60000,
      });
      const pushedAgainMs = again[1].receivedAt - killedAt;
      expect(again.map((r) => r.headers['webhook-id'])).toEqual(again.map(() => first.headers['webhook-id']));
      expect(again[1].headers['x-a2a-notification-token']).toBe('crash');
      const [recorded] = await waitFor(
        'the completion recorded as pushed',
        async () => {
          const rows = await queryPostgres<{ pushed: number; version: number; state: string }>(
            victim.options.env,
            'SELECT c.pushed_version AS pushed, t.version, t.state FROM a2a_push_configs c JOIN a2a_tasks t ON t.id = c.task_id WHERE c.task_id = $1',
            [taskId],
          );
          return rows.length === 1 && rows[0].pushed === rows[0].version && rows;
        },
        { timeoutMs: 30000 },
      );
      expect(recorded.state).toBe('completed');
      const title =
        "A2A push: the worker pushing a task's completion SIGKILLed (the receiver holding the push), a second instance started after";
      const summary = `pushed again ${pushedAgainMs} ms after the kill, under the same webhook-id (${again.length} pushes of the completion); recorded pushed at version ${recorded.version}`;
      reportRow(title, summary, [1, 1, 0, again.length - 1, '-', JSON.stringify({ acknowledged: 1 }), summary]);
    } finally {
      answer();
      await receiver.stop();
      await survivor.stop();
      await endDispatchWorkflows(survivor.options.env, [survivor.id]);
    }
  }, 270000);

  it('Postgres link cut while a push is being given up: after the heal it is pushed again and dead-lettered once, and its config moves on', async () => {
    // A receiver that always fails: each version's push is given up after 5 attempts (fast retries here). Signed
    // pushes: the push's id is in their webhook-id header.
    const at = (instance = new FaultInstance({
      id: `faults-a2a-${runId}-push-dlq`,
      env: {
        ...baseEnv,
        EVENTMESH_KAFKA_TOPICS: `faults-a2a-${runId}-push-dlq`,
        EVENTMESH_AGENTS_PUSH_SIGNING_SECRET: `whsec_${randomBytes(32).toString('base64')}`,
        EVENTMESH_DELIVERY_RETRY_INITIAL_MS: '100',
        EVENTMESH_DELIVERY_RETRY_MAX_MS: '200',
        EVENTMESH_DELIVERY_MAX_ATTEMPTS: '5',
      },
      proxyPostgres: true,
    }));
    await at.start();
    const receiver = new WebhookReceiver();
    await receiver.start();
    receiver.status = () => 500;
    let answer: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (answer = resolve));
    try {
      agent = new EchoAgent();
      await agent.start();
      const agentName = `echo-${runId}-push-dlq`;
      await register(at, agentName, agent.card());
      const key = randomUUID();
      const sent = await (
        await clientOf(at, agentName)
      ).sendMessage(
        SendMessageRequest.fromJSON({
          message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: `hold:${key}` }] },
          configuration: { returnImmediately: true, taskPushNotificationConfig: { url: receiver.url!, token: 'dlq' } },
        }),
      );
      const taskId = (sent as { id: string }).id;
      taskIds.push(taskId);
      // The completion's last attempt is held by the receiver until Postgres is cut, then answered 500: the push is
      // given up while nothing can be recorded.
      const completions = () =>
        receiver.requests.filter(
          (r) =>
            String(r.headers['webhook-id'] ?? '').startsWith(`${taskId}:`) &&
            r.body.toString('utf8').includes('TASK_STATE_COMPLETED'),
        );
      receiver.gate = (r) => (completions().length === 5 && completions()[4] === r ? held : undefined);
      await waitFor('the agent holding the task', () => agent!.isHeld(key), { timeoutMs: 60000 });
      agent.release(key);
      await waitFor("the completion's last attempt taken by the receiver", () => completions().length === 5, {
        timeoutMs: 30000,
      });
      at.postgres!.cut();
      const cutAt = Date.now();
      answer();
      await waitFor(`${CUT_MS} ms of cut`, () => Date.now() - cutAt >= CUT_MS, { timeoutMs: CUT_MS + 5000 });
      expect(completions()).toHaveLength(5);
      at.postgres!.heal();
      const healedAt = Date.now();
      // Temporal runs the push again after the heal: 5 attempts more, then the letter and the config's version.
      const [recorded] = await waitFor(
        'the completion dead-lettered and the config moved on',
        async () => {
          const rows = await queryPostgres<{ pushed: number; version: number; state: string; letters: string }>(
            at.options.env,
            `SELECT c.pushed_version AS pushed, t.version, t.state,
                    (SELECT count(*) FROM a2a_push_dead_letters l WHERE l.task_id = t.id AND l.config_id = c.id AND l.task_version = t.version) AS letters
               FROM a2a_push_configs c JOIN a2a_tasks t ON t.id = c.task_id WHERE c.task_id = $1`,
            [taskId],
          );
          return rows.length === 1 && rows[0].pushed === rows[0].version && rows;
        },
        { timeoutMs: 60000 },
      );
      const recordedMs = Date.now() - healedAt;
      expect(recorded.state).toBe('completed');
      expect(Number(recorded.letters)).toBe(1);
      const [letter] = await queryPostgres<{ attempts: number; last_http_status: number; resolution: string | null }>(
        at.options.env,
        'SELECT attempts, last_http_status, resolution FROM a2a_push_dead_letters WHERE task_id = $1 AND task_version = $2',
        [taskId, recorded.version],
      );
      expect(letter).toEqual({ attempts: 5, last_http_status: 500, resolution: null });
      // Pushed again from its first attempt, under the same webhook-id.
      expect(completions().length).toBe(10);
      expect(new Set(completions().map((r) => r.headers['webhook-id'])).size).toBe(1);
      const title = 'A2A push: Postgres link cut 5 s as a push is given up (the receiver failing every attempt)';
      const summary = `pushed again after the heal (${completions().length} attempts of the completion, one webhook-id); dead-lettered once and the config moved on ${recordedMs} ms after the heal`;
      reportRow(title, summary, [1, 1, 0, 0, '-', JSON.stringify({ acknowledged: 1 }), summary]);
    } finally {
      answer();
      await receiver.stop();
    }
  }, 240000);

  it('a mesh-subscriber agent of two replicas (long-poll, LOAD_BALANCE), one SIGKILLed with tasks in hand: every acknowledged task is completed exactly once', async () => {
    const rate = 4;
    const ackTimeoutMs = 3000;
    const at = await startInstance('replicas');
    const agentName = `worker-${runId}`;
    await register(
      at,
      agentName,
      {
        name: 'worker',
        description: 'two replicas behind one subscription',
        version: '1.0.0',
        supportedInterfaces: [],
        capabilities: { streaming: false, pushNotifications: false },
        defaultInputModes: ['text/plain'],
        defaultOutputModes: ['text/plain'],
        skills: [{ id: 'work', name: 'Work', description: 'works 1 s on a task', tags: ['test'] }],
      },
      'subscriber',
    );
    // The agent's subscription: LOAD_BALANCE shares the tasks between its replicas; a delivery not acked within
    // the ack timeout (a replica that died with it) is delivered again.
    const created = await fetch(`${at.url}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        protocol: 'STREAM',
        topic: requestTopicOf(TENANT, agentName),
        config: { policy: 'LOAD_BALANCE', startFrom: 'earliest', ackTimeoutMs },
      }),
      signal: AbortSignal.timeout(20000),
    });
    expect(created.status).toBe(201);
    const subscription = ((await created.json()) as { id: string }).id;
    const settings = { mesh: at.url, agent: agentName, subscription, window: 3, workMs: 1000, ackEveryMs: 1000 };
    replicas = [new Replica('r1', settings), new Replica('r2', settings)];
    const [victim, survivor] = replicas;
    await waitFor('both replicas polling', () => replicas.every((r) => r.lines.some((l) => l.event === 'polling')), {
      timeoutMs: 60000,
    });
    const client = await clientOf(at, agentName);

    const sends = new SendLoad(client, (n) => `job ${runId}-${n}`, rate);
    load = sends;
    const loadStartedAt = Date.now();
    sends.start();
    // Killed with tasks in hand in both stages: one it works on (not completed), one it completed and has not acked.
    await waitFor(
      'the victim working on a task and holding a completed one unacked',
      () => victim.unfinished().length > 0 && victim.completedUnacked().length > 0,
      {
        timeoutMs: 60000,
        intervalMs: 20,
      },
    );
    await victim.kill();
    const killedAt = Date.now();
    const working = victim.unfinished();
    const completedUnacked = victim.completedUnacked();
    const acknowledgedAtKill = sends.acknowledged().length;
    await sends.acknowledgedAtLeast(acknowledgedAtKill + 4 * rate, 60000);
    await sends.stop();
    const loadMs = Date.now() - loadStartedAt;

    const outcome = await outcomeOf(client, sends, killedAt);
    // What the victim held is delivered again, to the survivor: the tasks it worked on are completed there, the ones
    // it completed are found ended (409) and acked.
    const inHand = [...working, ...completedUnacked];
    const againAt = (t: string) =>
      survivor.lines.find((l) => l.event === 'received' && l.task === t && l.at > killedAt)?.at;
    const redelivered = await waitFor(
      "the victim's tasks delivered again to the survivor",
      () => inHand.every((t) => againAt(t) !== undefined) && Math.max(...inHand.map((t) => againAt(t)! - killedAt)),
      {
        // A deadline that means "hung": the redelivery waits out the victim's queued deliveries' timeouts, which a
        // host shared with the other lane stretches (45 s was passed once there).
        timeoutMs: 120000,
        intervalMs: 200,
      },
    ).catch(() => undefined);

    const lines = replicas.flatMap((r) => r.lines);
    const countOf = (pick: (l: ReplicaLine) => boolean) => {
      const counts = new Map<string, number>();
      for (const l of lines) if (pick(l)) counts.set(l.task!, (counts.get(l.task!) ?? 0) + 1);
      return counts;
    };
    const completions = countOf((l) => l.event === 'completed' && l.status === 200);
    const refusedUpdates = lines.filter((l) => l.event === 'completed' && l.status !== 200).map((l) => `${l.status}`);
    const endedFound = lines.filter((l) => l.event === 'ended');
    const receipts = countOf((l) => l.event === 'received');
    const duplicates = [...receipts.values()].reduce((sum, n) => sum + Math.max(0, n - 1), 0);
    const acknowledgedIds = outcome.acknowledged.map((s) => s.taskId!);
    const completedTimes = acknowledgedIds.map((t) => completions.get(t) ?? 0);
    // A completion the victim sent whose answer the kill swallowed: it logged `completing` and nothing after. It counts
    // only if the mesh's own record holds that completion, once: the task completed with the victim's artifact alone.
    const swallowed = new Set(
      victim.lines
        .filter(
          (l) => l.event === 'completing' && !victim.lines.some((o) => o.event === 'completed' && o.task === l.task),
        )
        .map((l) => l.task!),
    );
    const recordedByVictim = async (task: string) => {
      const [row] = await queryPostgres<{ state: string; artifacts: { artifactId: string }[] }>(
        at.options.env,
        'SELECT state, artifacts FROM a2a_tasks WHERE id = $1',
        [task],
      );
      return (
        row?.state === 'completed' &&
        row.artifacts.length === 1 &&
        row.artifacts[0].artifactId === `${task}-${victim.name}`
      );
    };
    for (const t of swallowed)
      if ((completions.get(t) ?? 0) === 0 && (await recordedByVictim(t))) completions.set(t, 1);
    const notOnce = acknowledgedIds.filter((t) => completions.get(t) !== 1);
    const byReplica = replicas
      .map((r) => `${r.name} ${r.lines.filter((l) => l.event === 'completed' && l.status === 200).length}`)
      .join(', ');
    taskIds = [...receipts.keys()];
    // Stream deliveries that failed (the replicas nack none: each is one held past the ack timeout, by the victim).
    const metrics = parsePrometheusText(
      await (await fetch(`${at.url}/metrics`, { signal: AbortSignal.timeout(5000) })).text(),
    );
    const timedOut = metrics.samples
      .filter(
        (m) =>
          m.name === 'eventmesh_delivery_attempts_total' &&
          m.labels.transport === 'stream' &&
          m.labels.outcome === 'failed',
      )
      .reduce((sum, m) => sum + m.value, 0);

    reportTasks(
      `A2A tasks: mesh-subscriber agent, 2 replicas (long-poll, LOAD_BALANCE, window 3, 1 s per task, ack timeout ${ackTimeoutMs / 1000} s), one SIGKILLed with tasks in hand, under ${rate} sends/s; 1 instance`,
      {
        sends,
        outcome,
        duplicates,
        instance: at,
        since: 'kill',
        lines: [
          `sent in ${loadMs} ms; the victim held at the kill: working ${working.length}, completed and not acked ${completedUnacked.length}; all delivered again to the survivor: ${redelivered === undefined ? 'NO' : `the last ${redelivered} ms after the kill`}`,
          `completed (200) by replica: ${byReplica}; tasks completed other than once: ${notOnce.length} (most ${Math.max(0, ...completedTimes)}); completions refused: ${JSON.stringify(refusedUpdates)}; found ended (409): ${endedFound.length}`,
          `receipts ${[...receipts.values()].reduce((a, b) => a + b, 0)} of ${receipts.size} tasks (${duplicates} more than once); stream deliveries failed (not acked within the ack timeout): ${timedOut}`,
        ],
        summary: `victim held ${working.length} working + ${completedUnacked.length} completed-unacked; the last redelivered ${redelivered ?? 'NO'} ms after the kill; each task completed once: ${notOnce.length === 0}`,
      },
    );

    // The kill came with tasks in hand in both stages.
    expect(working.length).toBeGreaterThan(0);
    expect(completedUnacked.length).toBeGreaterThan(0);
    // Nothing acknowledged is lost, and each task was completed once: one update `completed` answered 200.
    expect(outcome.notCompleted).toEqual({});
    expect(outcome.lost).toBe(0);
    expect(notOnce).toEqual([]);
    // What the victim held reached the survivor; the ones it had completed were found ended there (409), not redone.
    expect(redelivered).toBeDefined();
    expect(
      completedUnacked.filter((t) => !endedFound.some((l) => l.task === t && l.replica === survivor.name)),
    ).toEqual([]);
    // The victim stops being handed deliveries once one queued for it times out unpolled (libs/streams/poll-consumers.ts):
    // what it held when killed, and at most one window queued after, time out; not a share of everything sent for
    // the minute a silent consumer used to stay.
    expect(timedOut).toBeLessThanOrEqual(2 * settings.window);
    expect(at.process!.child.exitCode).toBeNull();
  }, 420000);
});
