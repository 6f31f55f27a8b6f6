import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { SendMessageRequest, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import { Client, ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { a2aTaskWorkflowIdOf } from '../../workflows';
import { EchoAgent } from '../support/a2a-echo-agent';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { endDispatchWorkflows, FaultInstance } from './cluster';
import { reportRow } from './report';

/** Sends per second, and how long the agent works on each task (so that tasks are in flight when the link is cut). */
const RATE = 8;
const WORK_MS = 2000;
const CUT_MS = 5000;
/** Client deadline of one send; no answer by then is not an acknowledgement. */
const SEND_TIMEOUT_MS = 10000;
const TERMINAL: ReadonlySet<TaskState> = new Set([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED]);

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
  return status ? `HTTP ${status}${code ? ` ${code}` : ''}` : `${error.constructor.name}: ${error.message.replace(/[0-9a-f-]{36}/g, '<id>').slice(0, 80)}`;
}

/** A task workflow's status and pending activity as the Temporal server has them (attempt, state, last failure). */
async function describeDelivery(taskId: string): Promise<string> {
  const { client, close } = await temporalClient();
  try {
    const d = await client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).describe();
    const a = d.raw.pendingActivities?.[0];
    return JSON.stringify({ status: d.status.name, activity: a?.activityType?.name, attempt: a?.attempt, state: a?.state, lastFailure: a?.lastFailure?.message, lastWorker: a?.lastWorkerIdentity });
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
    private readonly runId: string,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.sendOne(), 1000 / RATE);
  }

  private sendOne(): void {
    const entry: Sent = { text: `work:${WORK_MS}:${this.runId}-${this.sent.length}`, startedAt: Date.now() };
    this.sent.push(entry);
    const request = SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: entry.text }] }, configuration: { returnImmediately: true } });
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
}

/**
 * The tasks store under a Postgres fault (docs/failure-matrix.md, the row of `a2a_tasks`): one instance process,
 * its Postgres link through the fault proxy, a loopback A2A agent at a URL that works 2 s on each task, and A2A
 * sends through the SDK's client at 8/s (`returnImmediately`). During the load the link is cut for 5 s (open
 * connections dropped, new ones closed), then healed. A send is acknowledged when it is answered with a task; each
 * acknowledged task must reach `completed` (the tasks in flight at the cut included: their deliveries fail on
 * Postgres and Temporal retries them), and a send the mesh could not take must be refused with an error.
 */
describe('faults: A2A tasks', () => {
  const runId = randomUUID().slice(0, 8);
  const agentName = `echo-${runId}`;
  const env = {
    EVENTMESH_KAFKA_TOPICS: `faults-a2a-${runId}`,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
    EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
    EVENTMESH_AGENTS_CALL_TIMEOUT_MS: '2000',
    // Well past the run: a task that does not complete is lost here, not failed by its deadline.
    EVENTMESH_AGENTS_TASK_TIMEOUT_MS: '120000',
  };
  const agent = new EchoAgent();
  let instance: FaultInstance | undefined;
  let load: SendLoad | undefined;

  afterAll(async () => {
    await load?.stop();
    await instance?.stop();
    if (instance && process.env.FAULTS_LOG_DIR) writeFileSync(path.join(process.env.FAULTS_LOG_DIR, `${instance.id}.log`), instance.output());
    await agent.close();
    const { client, close } = await temporalClient();
    try {
      await terminateWorkflows(client, (load?.acknowledged() ?? []).map((s) => a2aTaskWorkflowIdOf(s.taskId!)));
    } finally {
      await close();
    }
    if (instance) await endDispatchWorkflows(env, [instance.id]);
  });

  it('Postgres link cut 5 s under a load of sends: every acknowledged task completes, a send not taken is refused with an error', async () => {
    await agent.start();
    instance = new FaultInstance({ id: `faults-a2a-${runId}`, env, proxyPostgres: true });
    await instance.start();
    const put = await fetch(`${instance.url}/a2a/agents/${agentName}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(agent.card()),
      signal: AbortSignal.timeout(20000),
    });
    expect(put.status).toBe(201);
    const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()], cardResolver: new DefaultAgentCardResolver() }).createFromUrl(
      `${instance.url}/a2a/agents/${agentName}/.well-known/agent-card.json`,
      '',
    );

    load = new SendLoad(client, runId);
    const loadStartedAt = Date.now();
    load.start();
    // 3 s of load: with 2 s of work per task, about 16 tasks are in flight at the agent when the link is cut.
    await load.acknowledgedAtLeast(3 * RATE, 20000);
    const proxy = instance.postgres!;
    proxy.cut();
    const cutAt = Date.now();
    await waitFor(`${CUT_MS} ms of cut`, () => Date.now() - cutAt >= CUT_MS, { timeoutMs: CUT_MS + 5000 });
    proxy.heal();
    const healedAt = Date.now();
    const acknowledgedAtHeal = load.acknowledged().length;
    // Sends are taken again after the heal: 5 s more of load.
    await load.acknowledgedAtLeast(acknowledgedAtHeal + 5 * RATE, 30000);
    await load.stop();
    const loadMs = Date.now() - loadStartedAt;

    // Every acknowledged task to a terminal state (GetTask), bounded.
    const acknowledged = load.acknowledged();
    const states = new Map<string, TaskState | undefined>();
    const open = () => acknowledged.filter((s) => !TERMINAL.has(states.get(s.taskId!) ?? TaskState.TASK_STATE_UNSPECIFIED));
    const ended = await waitFor(
      'every acknowledged task in a terminal state',
      async () => {
        for (const s of open()) {
          const task = await client.getTask({ tenant: '', id: s.taskId!, historyLength: 0 }, { signal: AbortSignal.timeout(5000) });
          states.set(s.taskId!, task.status?.state);
        }
        return open().length === 0;
      },
      { timeoutMs: 45000, intervalMs: 500 },
    ).catch(() => false);
    const endedMs = Date.now() - healedAt;

    const completed = acknowledged.filter((s) => states.get(s.taskId!) === TaskState.TASK_STATE_COMPLETED);
    const notCompleted: Record<string, number> = {};
    for (const s of acknowledged) {
      if (states.get(s.taskId!) === TaskState.TASK_STATE_COMPLETED) continue;
      const state = taskStateToJSON(states.get(s.taskId!) ?? TaskState.TASK_STATE_UNSPECIFIED);
      notCompleted[state] = (notCompleted[state] ?? 0) + 1;
    }
    const lost = acknowledged.length - completed.length;
    // What Temporal says of a task that did not complete: its workflow's pending delivery (attempt, last failure).
    const stuck = acknowledged.find((s) => states.get(s.taskId!) !== TaskState.TASK_STATE_COMPLETED);
    const stuckDetail = stuck ? await describeDelivery(stuck.taskId!).catch((e: Error) => e.message) : 'none';
    const receipts = new Map<string, number>();
    for (const text of agent.received) receipts.set(text, (receipts.get(text) ?? 0) + 1);
    const duplicated = [...receipts.values()].filter((n) => n > 1);
    const duplicates = duplicated.reduce((sum, n) => sum + n - 1, 0);
    const refusals: Record<string, number> = {};
    for (const s of load.sent) if (s.refusal) refusals[s.refusal] = (refusals[s.refusal] ?? 0) + 1;
    const startedInCut = load.sent.filter((s) => s.startedAt >= cutAt && s.startedAt < healedAt);
    const refusedInCut = startedInCut.filter((s) => s.refusal).length;
    // Acknowledged within the agent's working time before the cut: in flight at the agent when the link was cut.
    const inFlightAtCut = acknowledged.filter((s) => s.answeredAt! > cutAt - WORK_MS && s.answeredAt! <= cutAt).length;
    const takenThoughRefused = load.sent.filter((s) => s.refusal && receipts.has(s.text)).length;

    reportRow(
      `A2A tasks: Postgres link cut ${CUT_MS / 1000} s (proxy) under ${RATE} sends/s, agent works ${WORK_MS / 1000} s per task; 1 instance`,
      [
        `sends ${load.sent.length} in ${loadMs} ms; acknowledged ${acknowledged.length}; refused ${JSON.stringify(refusals)}`,
        `started during the cut: ${startedInCut.length}, refused ${refusedInCut}; in flight at the cut: ${inFlightAtCut}`,
        `every acknowledged task terminal: ${ended === true} (${endedMs} ms after the heal); not completed: ${JSON.stringify(notCompleted)}`,
        `agent received ${agent.received.length} (${receipts.size} distinct; ${duplicated.length} more than once); refused sends the agent got anyway: ${takenThoughRefused}`,
        `a task not completed: ${stuckDetail}`,
        `${instance.id}: logged ${JSON.stringify(instance.warnings())}`,
      ].join('\n'),
      [acknowledged.length, completed.length, lost, duplicates, '-', JSON.stringify({ acknowledged: acknowledged.length, ...refusals }), `in flight at the cut ${inFlightAtCut}; all ended ${endedMs} ms after the heal`],
    );

    // The fault took effect: sends during the cut were refused, and tasks were in flight when it came.
    expect(refusedInCut).toBeGreaterThan(0);
    expect(inFlightAtCut).toBeGreaterThan(0);
    // Nothing acknowledged is lost: every task answered with an id completed.
    expect(notCompleted).toEqual({});
    expect(lost).toBe(0);
    expect(instance.process!.child.exitCode).toBeNull();
  }, 180000);
});
