// The Temporal contracts: workflow ids and task queues, signals, queries, updates, search attributes, the inputs
// and results of workflows and activities, and each set of activities as an interface. workflows/ and activities/
// both import them and not each other. Deterministic code only, like workflows/ (eslint.config.mjs): the workflow
// bundle includes it.
export * from './ownership.contract';
export * from './dispatch.contract';
export * from './a2a-task.contract';
export * from './dead-letters.contract';
export * from './connector-job.contract';
