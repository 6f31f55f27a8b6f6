import { WorkflowNotFoundError } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import {
  createDeadLetterActivities,
  createDispatchActivities,
  createOwnershipActivities,
  PartitionLoopScope,
} from '../../../activities';
import { PushDeadLetterStore, type LocalA2AWorker, type TaskEventPublisher } from '@libs/a2a';
import type { EventMeshConfig } from '@libs/config';
import { DispatchLoop, RunningLoops, WebhookSender } from '@libs/delivery';
import type { RuntimeMetrics } from '@libs/metrics';
import { createLogger } from '@libs/logging';
import { BootError, Dependencies, reasonOf, shutdownInOrder, withDeadline } from '@libs/runtime';
import { CrashWatch, LivenessLock, livenessTimingFor, OwnershipAgent } from '@libs/ownership';
import {
  DeadLetterReplayStore,
  RetentionPurge,
  DeadLetterStore,
  DispatchRunStore,
  LeaseStore,
  PlacementStore,
  SubscriptionStore,
} from '@libs/storage';
import { PartitionReader } from '@libs/kafka';
import type { StreamDeliverer } from '@libs/streams';
import { OrphanTakeover } from '@libs/subscriptions';
import { DEAD_LETTER_TASK_QUEUE, dispatchWorkflowIdOf } from '@libs/temporal';
import type { TemporalTracing } from '@libs/tracing';
import { A2AWorker, createA2AWorker } from './a2a-worker';
import { createDispatchLoops } from './dispatch-loops';
import { installTemporalRuntime, workflowSource } from './temporal-runtime';
import { A2A_TASK_RETENTION, DLQ_RETENTION, ensureRetentionSchedule, RetentionSchedule } from './retention-schedules';
import {
  CONTROL_TASK_QUEUE,
  dispatchStatusQuery,
  INSTANCE_DISPATCH_WORKFLOW,
  InstanceDispatchStatus,
  InstanceDispatchWorkflow,
  instanceTaskQueueOf,
  partitionKeyOf,
  partitionProgressSignal,
  partitionWorkflowIdOf,
} from '../../../contracts';

/**
 * The worker of the shared dead-letter queue: replays and the retention purge, on whichever instance polls first.
 * No workflow cache, as on the control queue: a replay's next workflow task never waits for a dead instance's
 * sticky queue to time out.
 */
async function deadLetterWorkerOptions<T extends object>(
  common: T,
  activities: object,
  tracing: TemporalTracing | undefined,
) {
  return {
    ...common,
    taskQueue: DEAD_LETTER_TASK_QUEUE,
    activities,
    ...(await workflowSource(tracing)),
    maxCachedWorkflows: 0,
  };
}

/**
 * How long a boot waits to read the previous dispatch run of its instance (its pause, its totals) before it keeps
 * that run instead of replacing it. A workflow task Temporal handed to the process that just stopped is held until
 * its task timeout (10 s, Temporal's default) before the query is answered: CI saw the read answered after 7.0 s, past
 * the 5 s it had, and an operator's pause kept only because the old run was.
 */
const PREVIOUS_RUN_READ_MS = 15_000;

/** How long one dispatch (or partition poll) activity run lasts before its workflow starts the next one. */
const DISPATCH_RUN_MS = 10 * 60 * 1000;
/** What the instance watches of its worker: its metrics (absent: off) and its running dispatch loops. */
export interface WorkerObservers {
  metrics?: RuntimeMetrics;
  running?: RunningLoops;
}

/**
 * The instance's Temporal workers.
 *
 * LOCAL_STICKY_PULL: one worker on the instance's own task queue hosts the dispatch workflow and its
 * poll-and-dispatch activity, and the host makes sure `dispatch/<instanceId>` runs.
 *
 * PARTITION_OWNED_PULL: a worker on the instance's own queue hosts the lease activity and the partition poll
 * activities; a second worker on the shared control queue hosts the coordinator, partition and instance-lease
 * workflows (any live instance runs them). The {@link OwnershipAgent} joins and confirms the lease.
 *
 * Both: a worker on the shared A2A task queue runs the task workflows `a2a-task/<taskId>` and their activities
 * (delivering to agents at a URL, reading the requests back from the agents' request topics; docs/a2a.md).
 */
export class WorkerHost {
  private readonly log = createLogger('WorkerHost');
  private running: Promise<void>[] = [];
  /** PARTITION_OWNED_PULL only. */
  agent?: OwnershipAgent;
  /** PARTITION_OWNED_PULL only: the instance's liveness lock, and the watch on its peers' (crash takeover). */
  private liveness?: { lock: LivenessLock; watch: CrashWatch };
  /** LOCAL_STICKY_PULL only. */
  orphans?: OrphanTakeover;
  /** What the gateway of the same process uses of the A2A worker (a2a-worker.ts). */
  readonly a2a: LocalA2AWorker;
  private readonly a2aReader: PartitionReader;
  private readonly a2aEvents: TaskEventPublisher;

  private constructor(
    private readonly workers: Worker[],
    private readonly connection: NativeConnection,
    private readonly reader: PartitionReader,
    private readonly webhooks: WebhookSender,
    private readonly shutdown: AbortController,
    readonly taskQueue: string,
    a2a: A2AWorker,
  ) {
    this.a2a = a2a.local;
    this.a2aReader = a2a.reader;
    this.a2aEvents = a2a.events;
  }

  /** `onFatal` hears of a worker that stopped by itself (the instance can no longer dispatch). */
  static async start(
    config: EventMeshConfig,
    deps: Dependencies,
    onFatal: (reason: string) => void,
    streams: StreamDeliverer,
    observers: WorkerObservers = {},
  ): Promise<WorkerHost> {
    const { metrics } = observers;
    metrics?.setTemporalAddress(await installTemporalRuntime(createLogger('temporal'), config.metrics));
    const taskQueue = instanceTaskQueueOf(config.instance.id);
    let connection: NativeConnection;
    try {
      connection = await NativeConnection.connect({ address: config.temporal.address });
    } catch (e) {
      throw new BootError(
        `cannot reach Temporal at ${config.temporal.address} (EVENTMESH_TEMPORAL_ADDRESS): ${reasonOf(e)}`,
      );
    }
    const loopDb = deps.dispatchDb;
    const loops = await createDispatchLoops(config, deps, streams, observers);
    const { subscriptions, webhooks, sender, reader } = loops;
    const shutdown = new AbortController();
    const throttle = Math.floor(config.delivery.leaseTtlMs / 3);
    // Dead-letter replays and the retention purge: any instance's worker runs them (workflows/dlq-replay.workflow.ts).
    const subscriptionRows = new SubscriptionStore(deps.db);
    const deadLetterActivities = createDeadLetterActivities({
      replays: new DeadLetterReplayStore(deps.db),
      subscription: (id) => subscriptionRows.byId(id),
      sender,
      // The retention covers the delivery's dead letters and the A2A pushes' alike.
      purgeExpired: async (retentionDays) =>
        (await new RetentionPurge(new DeadLetterStore(deps.db), { retentionDays }).purge()) +
        (await new RetentionPurge(new PushDeadLetterStore(deps.db), {
          retentionDays,
          what: 'A2A push dead letters',
        }).purge()),
      deliveryTimeoutMs: config.delivery.webhookTimeoutMs,
      shutdownSignal: shutdown.signal,
    });
    const workerOptions = {
      connection,
      namespace: config.temporal.namespace,
      identity: `${config.instance.id}@${process.pid}`,
      maxHeartbeatThrottleInterval: throttle,
      defaultHeartbeatThrottleInterval: throttle,
      shutdownGraceTime: 10_000,
      // A shutdown is bounded even when Temporal does not answer (a stalled server holds the workers' polls): past
      // this, the workers stop without their cleanup and the instance's shutdown goes on (a replaced process's
      // activities time out by their heartbeats, as after a crash).
      shutdownForceTime: 25_000,
      // How long one workflow activation may run before its thread terminates it (the SDK's default is 5 s). That
      // timeout is wall-clock (Node's vm `timeout`): a process paused in the middle of an activation (a long GC, a
      // frozen VM, SIGSTOP) has it terminated as it wakes, and a termination mid-activation can bring the process
      // down: in a CI run, a paused owner woken after ~15 s exited with "async hook stack has become corrupted" from
      // its workflow thread (V8's TerminateExecution inside the SDK's promise hooks). The workflows are this
      // runtime's own and short; the bound is only against a runaway loop in them.
      isolateExecutionTimeout: '5m',
    };

    const a2a = await createA2AWorker(config, deps, {
      connection,
      webhooks,
      shutdown: shutdown.signal,
      options: { ...workerOptions, ...(await workflowSource(deps.tracing.temporal)) },
    });

    if (config.delivery.topology === 'LOCAL_STICKY_PULL') {
      const activities = createDispatchActivities({
        instanceId: config.instance.id,
        shutdownSignal: shutdown.signal,
        leaseTtlMs: config.delivery.leaseTtlMs,
        runs: new DispatchRunStore(loopDb, Math.floor(config.delivery.leaseTtlMs / 2)),
        createLoop: (fence) => new DispatchLoop(loops.depsFor(reader, fence)),
      });
      // No workflow cache, so no sticky queue: after a crash, the restarted process reads the previous dispatch
      // run (startDispatchWorkflow) with a query, which a sticky queue would hold for the dead worker until the
      // sticky timeout (10 s), longer than the read may take.
      const worker = await Worker.create({
        ...workerOptions,
        taskQueue,
        activities,
        ...(await workflowSource(deps.tracing.temporal)),
        maxCachedWorkflows: 0,
      });
      const deadLetterWorker = await Worker.create(
        await deadLetterWorkerOptions(workerOptions, deadLetterActivities, deps.tracing.temporal),
      );
      const host = new WorkerHost(
        [worker, a2a.worker, deadLetterWorker],
        connection,
        reader,
        webhooks,
        shutdown,
        taskQueue,
        a2a,
      );
      host.run(onFatal);
      await host.ensureRetentionSchedule(config, deps);
      try {
        await host.startDispatchWorkflow(config, deps);
      } catch (e) {
        await host.stop();
        throw new BootError(
          `cannot start the dispatch workflow on Temporal at ${config.temporal.address}: ${reasonOf(e)}`,
        );
      }
      host.orphans = new OrphanTakeover(new PlacementStore(deps.db, Math.floor(config.delivery.leaseTtlMs / 2)), {
        instanceId: config.instance.id,
        topics: config.kafka.topics,
        graceMs: config.delivery.orphanGraceMs,
        mode: config.delivery.orphanTakeover,
      });
      host.orphans.start();
      const orphans = host.orphans;
      if (metrics) metrics.sources.orphans = () => orphans.status();
      return host;
    }

    const timing = livenessTimingFor(config.delivery.leaseTtlMs);
    const liveness = new LivenessLock(config.postgres, { instanceId: config.instance.id, ...timing });
    const watch = new CrashWatch(deps.temporal.client, liveness, {
      instanceId: config.instance.id,
      leaseTtlMs: config.delivery.leaseTtlMs,
      windowMs: timing.windowMs,
      graceMs: Math.min(Math.floor(config.delivery.leaseTtlMs / 2), 4 * timing.windowMs),
    });
    const agent = new OwnershipAgent(deps.temporal.client, {
      instanceId: config.instance.id,
      leaseTtlMs: config.delivery.leaseTtlMs,
      liveness,
      partitionRunMs: DISPATCH_RUN_MS,
      // The configured topics' partitions, and those of the topics made at runtime that a subscription reads (an A2A
      // agent's, read by its replicas pulling its tasks or observers of its events; a tenant's own topics): owned from
      // the next announcement after the subscription.
      partitions: async () => {
        const keys: string[] = [];
        for (const topic of config.kafka.topics)
          for (const p of await deps.topics.partitionsOf(topic)) keys.push(partitionKeyOf(topic, p));
        for (const topic of await subscriptions.subscribedRuntimeTopics()) {
          // A topic that cannot be read now (its metadata not yet known) is announced at a later round.
          for (const p of await deps.topics.partitionsOf(topic).catch(() => [])) keys.push(partitionKeyOf(topic, p));
        }
        return keys;
      },
    });
    const activities = createOwnershipActivities({
      instanceId: config.instance.id,
      leaseTtlMs: config.delivery.leaseTtlMs,
      maxOwnedPartitions: config.delivery.maxOwnedPartitions,
      shutdownSignal: shutdown.signal,
      // Renewals of the instance's partitions within a fortieth of the TTL (at most 250 ms) go as one statement.
      leases: new LeaseStore(
        loopDb,
        Math.floor(config.delivery.leaseTtlMs / 2),
        Math.min(250, Math.floor(config.delivery.leaseTtlMs / 40)),
      ),
      membership: agent,
      openPartitionLoop: async (scope: PartitionLoopScope) => {
        const own = new PartitionReader(deps.kafka);
        await own.connect();
        const loop = new DispatchLoop(
          loops.depsFor(own, scope.fence, {
            subscriptions: {
              activeFor: () => loops.activeOnTopic(scope.topic),
              disable: (id, why, m) => subscriptions.disable(id, why, m),
            },
            scope: { topic: scope.topic, partition: scope.partition },
            gate: scope.gate,
          }),
        );
        return { loop, close: () => own.disconnect() };
      },
      reportProgress: async (topic, partition, progress) => {
        await deps.temporal.client.workflow
          .getHandle(partitionWorkflowIdOf(topic, partition))
          .signal(partitionProgressSignal, progress);
      },
    });
    const activityWorker = await Worker.create({
      ...workerOptions,
      taskQueue,
      activities,
      // Every partition the instance owns runs as one activity for as long as it owns it, and the instance lease
      // as one more: the SDK's default of 100 slots left the 100th partition onward waiting in the task queue,
      // unpolled, while the admin API showed it owned.
      maxConcurrentActivityTaskExecutions: config.delivery.maxOwnedPartitions + 1,
      ...(deps.tracing.temporal ? { interceptors: { activity: deps.tracing.temporal.activityInterceptors } } : {}),
    });
    const controlWorker = await Worker.create({
      ...workerOptions,
      taskQueue: CONTROL_TASK_QUEUE,
      ...(await workflowSource(deps.tracing.temporal)),
      // No workflow cache, so no sticky queues: with one, a workflow task goes first to the worker that ran the
      // workflow last, and if that worker's instance just died the task waits out the sticky timeout (10 s by
      // default) before any other worker runs it, at every step of a takeover. Without it, every live instance's
      // worker can run every task at once; the price is replaying the history each time, which the workflows
      // keep short (continue-as-new).
      maxCachedWorkflows: 0,
      // Two polls, not ten: a poll waiting in a paused process (SIGSTOP, a long GC) takes a task it cannot run until
      // the task times out (controlWorkflowTaskTimeoutMs), so the fewer it holds, the fewer tasks it can catch.
      workflowTaskPollerBehavior: { type: 'simple-maximum', maximum: 2 },
    });
    const deadLetterWorker = await Worker.create(
      await deadLetterWorkerOptions(workerOptions, deadLetterActivities, deps.tracing.temporal),
    );
    const host = new WorkerHost(
      [activityWorker, controlWorker, a2a.worker, deadLetterWorker],
      connection,
      reader,
      webhooks,
      shutdown,
      taskQueue,
      a2a,
    );
    host.run(onFatal);
    await host.ensureRetentionSchedule(config, deps);
    host.liveness = { lock: liveness, watch };
    // Before joining: a peer's takeover after this instance's previous process crashed lets the lock go when done.
    await liveness.start(3 * config.delivery.leaseTtlMs);
    try {
      await agent.start();
    } catch (e) {
      await host.stop();
      throw new BootError(`cannot join the partition owners on Temporal at ${config.temporal.address}: ${reasonOf(e)}`);
    }
    host.agent = agent;
    if (metrics) metrics.sources.ownership = () => agent.status();
    host.log.info(
      { taskQueue, controlTaskQueue: CONTROL_TASK_QUEUE },
      'Temporal workers running; joined the partition owners',
    );
    return host;
  }

  /**
   * The retentions run as Temporal schedules, written at every boot with this instance's retentions: `dlq-retention`
   * (the dead letters, the delivery's and the A2A pushes') and `a2a-task-retention` (the A2A tasks that ended). Not
   * fatal when one fails: delivery goes on, and the next boot writes it again.
   */
  private async ensureRetentionSchedule(config: EventMeshConfig, deps: Dependencies): Promise<void> {
    const write = async (retention: RetentionSchedule, retentionDays: number, what: string) => {
      try {
        const outcome = await withDeadline(
          10_000,
          ensureRetentionSchedule(deps.temporal.client, retention, retentionDays),
        );
        this.log.info(
          { schedule: outcome.scheduleId, outcome: outcome.action, retentionDays },
          `${what} retention schedule`,
        );
      } catch (e) {
        this.log.error(
          { error: reasonOf(e), schedule: retention.scheduleId },
          `could not write the ${what} retention schedule; ${what} are not purged until an instance writes it`,
        );
      }
    };
    await write(DLQ_RETENTION, config.delivery.deadLetterRetentionDays, 'dead letters');
    await write(A2A_TASK_RETENTION, config.agents.taskRetentionDays, 'A2A tasks');
  }

  private run(onFatal: (reason: string) => void): void {
    // A worker that stops while the instance runs (an error, or a shutdown nobody here asked for) leaves an
    // instance that takes events and delivers none: that is fatal, never silent.
    this.running = this.workers.map((worker) =>
      worker.run().then(
        () => {
          if (this.shutdown.signal.aborted) return;
          this.log.error({ taskQueue: worker.options.taskQueue }, 'Temporal worker stopped by itself');
          onFatal(`the Temporal worker of task queue ${worker.options.taskQueue} stopped by itself`);
        },
        (e: unknown) => {
          this.log.error({ error: reasonOf(e) }, 'Temporal worker stopped with an error');
          if (!this.shutdown.signal.aborted) onFatal(`the Temporal worker stopped: ${reasonOf(e)}`);
        },
      ),
    );
  }

  /**
   * This process is the instance now: a run left by its previous process is replaced, so dispatch resumes at
   * once instead of after that run's heartbeat timeout. What the old run knew (totals, an operator's pause) is
   * read from it first, through this worker, and carried over. If it cannot be read, the old run is kept
   * rather than replaced (its activity moves to this worker after its heartbeat timeout): slower, but an
   * operator's pause is never lifted by a restart.
   */
  private async startDispatchWorkflow(config: EventMeshConfig, deps: Dependencies): Promise<void> {
    const workflowId = dispatchWorkflowIdOf(config.instance.id);
    const client = deps.temporal.client;
    let previous: InstanceDispatchStatus | undefined;
    let unreadable = false;
    try {
      const handle = client.workflow.getHandle(workflowId);
      if ((await handle.describe()).status.name === 'RUNNING') {
        previous = await withDeadline(PREVIOUS_RUN_READ_MS, handle.query(dispatchStatusQuery));
      }
    } catch (e) {
      if (!(e instanceof WorkflowNotFoundError)) {
        unreadable = true;
        this.log.warn({ error: reasonOf(e) }, 'could not read the previous dispatch run; keeping it');
      }
    }
    await client.workflow.start<InstanceDispatchWorkflow>(INSTANCE_DISPATCH_WORKFLOW, {
      workflowId,
      taskQueue: this.taskQueue,
      args: [
        {
          instanceId: config.instance.id,
          leaseTtlMs: config.delivery.leaseTtlMs,
          runMs: DISPATCH_RUN_MS,
          totals: previous?.totals,
          paused: previous?.paused,
        },
      ],
      workflowIdConflictPolicy: unreadable ? 'USE_EXISTING' : 'TERMINATE_EXISTING',
    });
    this.log.info(
      { taskQueue: this.taskQueue, workflowId, paused: previous?.paused ?? false, replaced: !unreadable },
      'Temporal worker running; dispatch workflow started',
    );
  }

  async stop(): Promise<void> {
    this.shutdown.abort();
    await shutdownInOrder('worker', [
      ['ownership agent', () => this.agent?.stop()],
      ['orphan takeover', () => this.orphans?.stop()],
      ['Temporal workers asked to stop', () => this.workers.forEach((w) => w.getState() === 'RUNNING' && w.shutdown())],
      // Each Temporal worker ends once its polls are answered and its activities returned (shutdownGraceTime).
      ...this.workers.map(
        (worker, i) => [`Temporal worker of task queue ${worker.options.taskQueue}`, () => this.running[i]] as const,
      ),
      ['Temporal worker connection', () => this.connection.close()],
      // After the lease ended as stopped: a peer that found the lock released earlier would end it as lost.
      ['crash watch', () => this.liveness?.watch.stop()],
      ['liveness lock', () => this.liveness?.lock.stop()],
      ['Kafka reader', () => this.reader.disconnect()],
      ['Kafka reader of the A2A request topics', () => this.a2aReader.disconnect()],
      ['publisher of the A2A task events', () => this.a2aEvents.close()],
      ['webhook sender', () => this.webhooks.close()],
    ]);
  }
}
