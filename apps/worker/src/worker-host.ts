import { WorkflowNotFoundError } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createDispatchActivities } from '../../../activities';
import type { EventMeshConfig } from '../../../libs/config';
import { DispatchLoop, WebhookSender } from '../../../libs/delivery';
import { createLogger, Logger } from '../../../libs/logging';
import { BootError, Dependencies, reasonOf, withDeadline } from '../../../libs/runtime';
import { DeadLetterStore, OffsetStore, RetryStore } from '../../../libs/storage';
import { PartitionReader } from '../../../libs/kafka';
import { SinkRouter, StreamHub } from '../../../libs/streams';
import { SubscriptionService } from '../../../libs/subscriptions';
import { dispatchWorkflowIdOf, taskQueueOf } from '../../../libs/temporal';
import { dispatchStatusQuery, instanceDispatchWorkflow, InstanceDispatchStatus } from '../../../workflows';

/** How long one dispatch activity run lasts before the workflow starts the next one. */
const DISPATCH_RUN_MS = 10 * 60 * 1000;

let runtimeInstalled = false;

function installTemporalRuntime(log: Logger): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  Runtime.install({
    logger: new DefaultLogger('WARN', (entry) => {
      const fields = { ...(entry.meta ?? {}) };
      if (entry.level === 'ERROR') log.error(fields, entry.message);
      else log.warn(fields, entry.message);
    }),
  });
}

/** The bundle `npm run build` wrote next to the compiled code, else the workflow sources (bundled at start). */
function workflowSource(): { workflowBundle: { codePath: string } } | { workflowsPath: string } {
  const workflowsDir = path.resolve(__dirname, '../../../workflows');
  const built = path.resolve(__dirname, '../../../workflow-bundle.js');
  if (existsSync(built)) {
    return { workflowBundle: { codePath: built } };
  }
  return { workflowsPath: require.resolve(workflowsDir) };
}

/**
 * The instance's Temporal worker: polls the instance's own task queue, hosts the poll-and-dispatch activity and
 * the dispatch workflow, and makes sure `dispatch/<instanceId>` runs.
 */
export class WorkerHost {
  private readonly log = createLogger('WorkerHost');
  private running?: Promise<void>;

  private constructor(
    private readonly worker: Worker,
    private readonly connection: NativeConnection,
    private readonly reader: PartitionReader,
    private readonly shutdown: AbortController,
    readonly taskQueue: string,
  ) {}

  /** `onFatal` hears of a worker that stopped by itself (the instance can no longer dispatch). */
  static async start(
    config: EventMeshConfig,
    deps: Dependencies,
    onFatal: (reason: string) => void,
    streams: StreamHub,
  ): Promise<WorkerHost> {
    installTemporalRuntime(createLogger('temporal'));
    const taskQueue = taskQueueOf(config.instance.id);
    let connection: NativeConnection;
    try {
      connection = await NativeConnection.connect({ address: config.temporal.address });
    } catch (e) {
      throw new BootError(`cannot reach Temporal at ${config.temporal.address} (EVENTMESH_TEMPORAL_ADDRESS): ${reasonOf(e)}`);
    }
    const offsets = new OffsetStore(deps.db);
    const deadLetters = new DeadLetterStore(deps.db);
    const retries = new RetryStore(deps.db, deadLetters);
    const subscriptions = SubscriptionService.forInstance(deps.db, deps.topics, config);
    const sender = new SinkRouter(new WebhookSender(config.delivery.webhookTimeoutMs), streams);
    const reader = new PartitionReader(deps.kafka);
    await reader.connect();
    const shutdown = new AbortController();
    const activities = createDispatchActivities({
      instanceId: config.instance.id,
      shutdownSignal: shutdown.signal,
      leaseTtlMs: config.delivery.leaseTtlMs,
      createLoop: () =>
        new DispatchLoop({
          instanceId: config.instance.id,
          subscriptions,
          offsets,
          deadLetters,
          retries,
          reader,
          topics: deps.topics,
          sender,
          options: {
            pollMaxWaitMs: 500,
            batchMaxEvents: config.delivery.pollBatchMaxEvents,
            refreshIntervalMs: 1000,
            retryInitialMs: config.delivery.retryInitialMs,
            retryMaxMs: config.delivery.retryMaxMs,
            maxAttempts: config.delivery.maxAttempts,
          },
        }),
    });
    const throttle = Math.floor(config.delivery.leaseTtlMs / 3);
    const worker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue,
      identity: `${config.instance.id}@${process.pid}`,
      activities,
      ...workflowSource(),
      maxHeartbeatThrottleInterval: throttle,
      defaultHeartbeatThrottleInterval: throttle,
      shutdownGraceTime: '10s',
    });
    const host = new WorkerHost(worker, connection, reader, shutdown, taskQueue);
    host.running = worker.run().catch((e: unknown) => {
      host.log.error({ error: reasonOf(e) }, 'Temporal worker stopped with an error');
      if (!host.shutdown.signal.aborted) onFatal(`the Temporal worker stopped: ${reasonOf(e)}`);
    });
    try {
      await host.startDispatchWorkflow(config, deps);
    } catch (e) {
      await host.stop();
      throw new BootError(`cannot start the dispatch workflow on Temporal at ${config.temporal.address}: ${reasonOf(e)}`);
    }
    return host;
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
        previous = await withDeadline(5000, handle.query(dispatchStatusQuery));
      }
    } catch (e) {
      if (!(e instanceof WorkflowNotFoundError)) {
        unreadable = true;
        this.log.warn({ error: reasonOf(e) }, 'could not read the previous dispatch run; keeping it');
      }
    }
    await client.workflow.start(instanceDispatchWorkflow, {
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
    if (this.worker.getState() === 'RUNNING') this.worker.shutdown();
    await this.running?.catch(() => undefined);
    await this.connection.close().catch(() => undefined);
    await this.reader.disconnect().catch(() => undefined);
  }
}
