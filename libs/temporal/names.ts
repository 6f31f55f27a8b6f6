/** Names shared by the worker, the client side and the docs: one place, one spelling. */
export const dispatchWorkflowIdOf = (instanceId: string) => `dispatch/${instanceId}`;
/** The task queue every instance's worker polls for dead-letter work: replays and the retention purge. */
export const DEAD_LETTER_TASK_QUEUE = 'eventmesh-dead-letters';
/** A dead-letter replay (workflows/dlq-replay.workflow.ts), as the Temporal UI lists it. */
export const dlqReplayWorkflowIdOf = (replayId: string) => `dlq-replay/${replayId}`;
/** The Temporal schedule that runs the dead-letter retention purge (workflows/dlq-retention.workflow.ts). */
export const DLQ_RETENTION_SCHEDULE_ID = 'dlq-retention';
/** The Temporal schedule that runs the A2A task retention purge (workflows/a2a-task-retention.workflow.ts). */
export const A2A_TASK_RETENTION_SCHEDULE_ID = 'a2a-task-retention';
