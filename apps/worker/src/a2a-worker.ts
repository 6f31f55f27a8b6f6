import { Client } from '@temporalio/client';
import { NativeConnection, Worker, WorkerOptions } from '@temporalio/worker';
import { createA2ATaskActivities } from '../../../activities';
import {
  A2AAgentStore,
  type A2AState,
  A2ATaskStore,
  AgentClients,
  FirstAttempts,
  KafkaRequestRecords,
  LocalA2AWorker,
  ParkedStreams,
  PUBLISH_DELAY_MS,
  RequestHandoff,
  SETTLED,
  signalTaskChanged,
  TaskEventPublisher,
  TaskPusher,
  TaskRelay,
  TaskSettlements,
} from '@libs/a2a';
import type { EventMeshConfig } from '@libs/config';
import type { WebhookSender } from '@libs/delivery';
import { PartitionReader } from '@libs/kafka';
import type { Dependencies } from '@libs/runtime';
import { RetentionPurge } from '@libs/storage';
import { SinkGuard } from '@libs/security';
import { A2A_TASK_QUEUE } from '../../../contracts';

/** How often a worker sweeps for task events left unpublished, and how old their task's last change must be. */
const EVENTS_SWEEP_MS = 5000;

/** The A2A part of an instance's worker: its Temporal worker, the reader it closes, and what the gateway uses of it. */
export interface A2AWorker {
  worker: Worker;
  /** The reader of the agents' request topics (the deliveries read each task's request back). */
  reader: PartitionReader;
  /** Copies the task events the deliveries commit to the agents' events topics, and sweeps what others left. */
  events: TaskEventPublisher;
  /**
   * For the gateway of the same process (docs/a2a.md#the-model): a client on this worker's own connection, to start
   * task workflows with eager start (the server hands a workflow's first task back in the start call's answer, to
   * this worker, instead of through the task queue); the first attempts it begins for such a workflow, which its
   * local activity adopts; and the news of the tasks its deliveries settled, which a blocking send waiting here
   * answers at once.
   */
  local: LocalA2AWorker;
}

/**
 * A2A tasks (docs/a2a.md): every instance runs the task workflows and their deliveries, on the shared queue. The
 * deliveries read requests from Kafka and call agents through the sink guard; pushes go through the runtime's
 * webhook sender (signed, SSRF-guarded) with its retry policy. `running` is false once the instance's worker stops.
 */
export async function createA2AWorker(
  config: EventMeshConfig,
  deps: Dependencies,
  common: {
    connection: NativeConnection;
    webhooks: WebhookSender;
    shutdown: AbortSignal;
    options: Omit<WorkerOptions, 'taskQueue'>;
  },
): Promise<A2AWorker> {
  const reader = new PartitionReader(deps.kafka);
  await reader.connect();
  // The changes the deliveries commit go to the agents' events topics from here; the sweep takes what a crash left.
  const events = new TaskEventPublisher(
    deps.db,
    {
      publishAll: (topic, frames) => deps.producer.publishAll(topic, frames),
      ensureTopic: (topic) => deps.topics.ensureTopic(topic),
    },
    { delayMs: PUBLISH_DELAY_MS, sweepMs: EVENTS_SWEEP_MS, sweepAfterMs: EVENTS_SWEEP_MS },
  );
  const settlements = new TaskSettlements();
  const tasks = new A2ATaskStore(deps.db, (task) => {
    events.changed(task);
    // A blocking send of this process waiting for the task answers with the task as committed, without reading it back.
    if (SETTLED.has(task.state)) settlements.settled(task);
  });
  // What the gateway of this process writes to the request topics, handed to the deliveries this worker runs.
  const requests = new RequestHandoff();
  const parkedStreams = new ParkedStreams({ shutdown: common.shutdown });
  const relay = new TaskRelay(
    tasks,
    new A2AAgentStore(deps.db),
    new AgentClients(SinkGuard.fromConfig(config).agent(), config.agents.callTimeoutMs, config.agents.maxAnswerBytes),
    new KafkaRequestRecords(reader, requests),
    deps.producer,
    // A first attempt's stream of an agent that streams, left open for the delivery after it on this worker.
    parkedStreams,
  );
  const pusher = TaskPusher.forInstance(deps.db, config, common.webhooks);
  // The first attempts the gateway of this process begins as it starts a task's workflow here; its local activity adopts them.
  const firstAttempts = new FirstAttempts(relay, common.shutdown);
  const client = new Client({
    connection: common.connection,
    namespace: config.temporal.namespace,
    interceptors: { workflow: deps.tracing.temporal?.clientInterceptors ?? [] },
  });
  // A delivery tells its task's workflow of each change it records, on this worker's connection.
  const changes = {
    changed: (taskId: string, state: A2AState, version: number) => signalTaskChanged(client, taskId, state, version),
  };
  const worker = await Worker.create({
    ...common.options,
    taskQueue: A2A_TASK_QUEUE,
    // A task's first workflow task holds its slot (and a local activity's) for the whole first delivery attempt, and
    // a start is eager only while a slot is free: with the SDK's 40, a loaded instance ran out of them and a quarter
    // of its tasks started through the task queue (docs/benchmarks.md). The SDK lowers the slots to the workflow
    // cache's size when that is smaller; the cache keeps as many tasks between their workflow tasks as run.
    maxConcurrentWorkflowTaskExecutions: config.agents.workerSlots,
    maxConcurrentLocalActivityExecutions: config.agents.workerSlots,
    maxCachedWorkflows: 2 * config.agents.workerSlots,
    activities: createA2ATaskActivities({
      relay,
      firstAttempts,
      pusher,
      shutdownSignal: common.shutdown,
      changes,
      purgeExpiredTasks: (retentionDays) => new RetentionPurge(tasks, { retentionDays, what: 'A2A tasks' }).purge(),
    }),
  });
  return {
    worker,
    reader,
    events,
    local: {
      client,
      settlements,
      events,
      requests,
      firstAttempts,
      parkedStreams,
      running: () => !common.shutdown.aborted,
    },
  };
}
