import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { OwnershipActivities } from '../../contracts';
import {
  assignmentQuery,
  assignOwnerSignal,
  coordinatorWorkflow,
  drainUpdate,
  EPOCH_BEHIND,
  instanceTaskQueueOf,
  joinSignal,
  moveUpdate,
  partitionKeyOf,
  partitionStatusQuery,
  partitionWorkflow,
  PollPartitionInput,
} from '../../workflows';
import { testConfig } from '../support/env';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * The partition and coordinator workflows on the real Temporal server, with stand-in activities on each owner's
 * task queue (no Kafka, no Postgres): planned moves wait for the old run to settle, moves from a lost owner do
 * not, an epoch behind Postgres is caught up, and both workflows continue as new without losing their state.
 */
describe('ownership workflows (real Temporal, stand-in activities)', () => {
  const config = testConfig();
  const suffix = randomUUID().slice(0, 6);
  const owners = { a: `a-${suffix}`, b: `b-${suffix}`, c: `c-${suffix}` };
  const workflowQueue = `ownership-spec-${suffix}`;
  const topic = `ownership-spec-${suffix}`;
  let temporal: { client: Client; close(): Promise<void> };
  let connection: NativeConnection;
  const workers: Worker[] = [];
  const running: Promise<void>[] = [];
  const started: string[] = [];

  /** What each owner's stand-in did, in order: `<owner> started|settled|returned <epoch>`. */
  const log: { what: string; at: number }[] = [];
  const record = (what: string) => log.push({ what, at: Date.now() });
  const indexOf = (what: string) => log.findIndex((l) => l.what === what);
  /** How long an owner's run takes to settle after a cancel (the commit of a real one). */
  const settleMs: Record<string, number> = {};
  /** Owners whose next claim finds Postgres at this epoch. */
  const postgresEpoch: Record<string, number> = {};

  const standIn = (owner: string): Pick<OwnershipActivities, 'pollPartition' | 'holdInstanceLease'> => ({
    async holdInstanceLease() {
      return { stoppedBy: 'shutdown' as const };
    },
    async pollPartition(input: PollPartitionInput) {
      const ctx = Context.current();
      const behind = postgresEpoch[owner];
      if (behind !== undefined && input.epoch <= behind) {
        record(`${owner} behind ${input.epoch}`);
        throw ApplicationFailure.nonRetryable('behind', EPOCH_BEHIND, { current: behind });
      }
      record(`${owner} started ${input.epoch}`);
      const deadline = Date.now() + input.runMs;
      while (!ctx.cancellationSignal.aborted && Date.now() < deadline) {
        ctx.heartbeat();
        await new Promise((r) => setTimeout(r, 50));
      }
      if (ctx.cancellationSignal.aborted) {
        await new Promise((r) => setTimeout(r, settleMs[owner] ?? 0));
        record(`${owner} settled ${input.epoch}`);
        await ctx.cancelled;
      }
      record(`${owner} returned ${input.epoch}`);
      return { delivered: 0, stoppedBy: 'deadline' as const };
    },
  });

  beforeAll(async () => {
    temporal = await temporalClient();
    connection = await NativeConnection.connect({ address: config.temporal.address });
    const common = {
      connection,
      namespace: config.temporal.namespace,
      maxHeartbeatThrottleInterval: 200,
      defaultHeartbeatThrottleInterval: 200,
    };
    workers.push(
      await Worker.create({ ...common, taskQueue: workflowQueue, workflowsPath: require.resolve('../../workflows') }),
    );
    for (const owner of Object.values(owners)) {
      workers.push(
        await Worker.create({ ...common, taskQueue: instanceTaskQueueOf(owner), activities: standIn(owner) }),
      );
    }
    running.push(...workers.map((w) => w.run()));
  });

  afterAll(async () => {
    await terminateWorkflows(temporal.client, started);
    for (const w of workers) w.shutdown();
    await Promise.all(running);
    await connection.close();
    await temporal.close();
  });

  const startPartition = async (
    partition: number,
    owner: string,
    extra: { runMs?: number; runsPerExecution?: number } = {},
  ) => {
    const workflowId = `partition/${topic}/${partition}`;
    started.push(workflowId);
    return temporal.client.workflow.start(partitionWorkflow, {
      workflowId,
      taskQueue: workflowQueue,
      args: [
        {
          topic,
          partition,
          leaseTtlMs: 3000,
          runMs: extra.runMs ?? 600000,
          owner,
          epoch: 0,
          runsPerExecution: extra.runsPerExecution,
        },
      ],
    });
  };

  it('hands a planned move over only after the old run settled, with the next epoch', async () => {
    const handle = await startPartition(0, owners.a);
    await waitFor('a to start epoch 1', () => indexOf(`${owners.a} started 1`) >= 0);
    settleMs[owners.a] = 500;
    await handle.signal(assignOwnerSignal, { owner: owners.b, graceful: true });
    await waitFor('b to start epoch 2', () => indexOf(`${owners.b} started 2`) >= 0);
    expect(indexOf(`${owners.a} settled 1`)).toBeGreaterThanOrEqual(0);
    expect(indexOf(`${owners.a} settled 1`)).toBeLessThan(indexOf(`${owners.b} started 2`));
    expect(await handle.query(partitionStatusQuery)).toMatchObject({
      owner: owners.b,
      epoch: 2,
      polling: true,
      ownerChanges: 1,
    });
  });

  it('moves away from a lost owner without waiting for it to settle', async () => {
    const handle = temporal.client.workflow.getHandle(`partition/${topic}/0`);
    settleMs[owners.b] = 3000;
    await handle.signal(assignOwnerSignal, { owner: owners.a, graceful: false });
    await waitFor('a to start epoch 3', () => indexOf(`${owners.a} started 3`) >= 0);
    expect(indexOf(`${owners.b} settled 2`)).toBe(-1);
    await waitFor('b to settle after all', () => indexOf(`${owners.b} settled 2`) >= 0);
  });

  it('catches up with the epoch Postgres holds when its own is behind', async () => {
    const handle = await startPartition(1, owners.c);
    postgresEpoch[owners.c] = 7;
    await waitFor('c to start above epoch 7', () => log.find((l) => l.what.startsWith(`${owners.c} started`)));
    expect(indexOf(`${owners.c} behind 1`)).toBeGreaterThanOrEqual(0);
    expect(indexOf(`${owners.c} started 8`)).toBeGreaterThanOrEqual(0);
    expect((await handle.query(partitionStatusQuery)).epoch).toBe(8);
  });

  it('continues as new after its runs, keeping owner and epoch (a clean return keeps the epoch)', async () => {
    delete postgresEpoch[owners.c];
    const handle = await startPartition(2, owners.c, { runMs: 100, runsPerExecution: 2 });
    const first = temporal.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId);
    await waitFor(
      'the first execution to continue as new',
      async () => (await first.describe()).status.name === 'CONTINUED_AS_NEW',
    );
    const status = await temporal.client.workflow.getHandle(handle.workflowId).query(partitionStatusQuery);
    expect(status).toMatchObject({ owner: owners.c, epoch: 1 });
    const history = await first.fetchHistory();
    // Only ids, offsets and epochs pass through history: the activity input has no event in it.
    const input = history.events!.find((e) => e.activityTaskScheduledEventAttributes)!
      .activityTaskScheduledEventAttributes!.input!.payloads![0].data!;
    expect(Object.keys(JSON.parse(Buffer.from(input).toString())).sort()).toEqual([
      'epoch',
      'owner',
      'partition',
      'runMs',
      'topic',
    ]);
  });

  it('coordinator: balances joins, refuses a bad move, drains, and keeps its state across continue-as-new', async () => {
    const workflowId = `coordinator-spec-${suffix}`;
    const coordinatorTopic = `${topic}-coord`;
    const partitions = [0, 1, 2, 3].map((p) => partitionKeyOf(coordinatorTopic, p));
    started.push(workflowId, ...[0, 1, 2, 3].map((p) => `partition/${coordinatorTopic}/${p}`));
    const handle = await temporal.client.workflow.start(coordinatorWorkflow, {
      workflowId,
      taskQueue: workflowQueue,
      args: [{ leaseTtlMs: 3000, runMs: 600000, maxHistoryEvents: 40 }],
    });
    await handle.signal(joinSignal, { instanceId: owners.a, leaseRunId: 'run-a', partitions });
    await handle.signal(joinSignal, { instanceId: owners.b, leaseRunId: 'run-b', partitions });
    const balanced = await waitFor('2 partitions each', async () => {
      const v = await handle.query(assignmentQuery);
      const counts = Object.values(v.owners).filter((o) => o === owners.a).length;
      return v.members.length === 2 && counts === 2 ? v : undefined;
    });
    expect(Object.keys(balanced.owners).sort()).toEqual(partitions);

    await expect(
      handle.executeUpdate(moveUpdate, { args: [{ partition: partitions[0], to: 'nobody' }] }),
    ).rejects.toBeInstanceOf(WorkflowUpdateFailedError);
    const moves = await handle.executeUpdate(drainUpdate, { args: [{ instanceId: owners.a, drained: true }] });
    expect(moves).toHaveLength(2);
    for (const m of moves) expect(m).toMatchObject({ from: owners.a, to: owners.b });
    const back = await handle.executeUpdate(drainUpdate, { args: [{ instanceId: owners.a, drained: false }] });
    expect(back).toHaveLength(2);
    for (const m of back) expect(m).toMatchObject({ from: owners.b, to: owners.a });
    // Enough traffic to pass maxHistoryEvents: joins of the same members again change nothing but history.
    for (let i = 0; i < 8; i++)
      await handle.signal(joinSignal, { instanceId: owners.b, leaseRunId: 'run-b', partitions });
    await waitFor(
      'the coordinator to continue as new',
      async () =>
        (await temporal.client.workflow.getHandle(workflowId, handle.firstExecutionRunId).describe()).status.name ===
        'CONTINUED_AS_NEW',
    );
    const after = await temporal.client.workflow.getHandle(workflowId).query(assignmentQuery);
    expect(after.members).toEqual([owners.a, owners.b].sort());
    expect(after.drained).toEqual([]);
    expect(Object.values(after.owners).filter((o) => o === owners.a)).toHaveLength(2);
    expect(after.generation).toBeGreaterThanOrEqual(balanced.generation + 2);
  });
});
