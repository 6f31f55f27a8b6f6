// The Temporal workflow bundle: deterministic code only. Lint forbids Node built-ins and I/O libraries here,
export * from './dispatch.workflow';
export * from './assignment';
export * from './partition.workflow';
export * from './instance-lease.workflow';
export * from './coordinator.workflow';
export * from './a2a-task.workflow';
export * from './dlq-replay.workflow';
export * from './dlq-retention.workflow';
export * from './a2a-task-retention.workflow';
export * from './connector-job.workflow';
// The Temporal contracts, for the apps and tests that still import them from here.
export * from '../contracts';
