export {
  A2A_TASK_RETENTION_SCHEDULE_ID,
  DEAD_LETTER_TASK_QUEUE,
  DLQ_RETENTION_SCHEDULE_ID,
  dispatchWorkflowIdOf,
  dlqReplayWorkflowIdOf,
} from './names';
export { connectTemporal, pingTemporal } from './temporal-connection';
export type { TemporalHandle } from './temporal-connection';
