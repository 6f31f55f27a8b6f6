// The epoch fence and the fenced-run helper every claim -> heartbeat -> fenced-write loop uses (dispatch runs,
// partition leases, connector jobs). A lib of its own so that a process outside the runtime (apps/connectors)
// reuses it without reaching into the runtime's storage.
export { EpochFence, StaleEpochError, UNFENCED, describeScope } from './epoch-fence';
export type { EpochTable, FencedScope, WriteFence } from './epoch-fence';
export { runFenced } from './fenced-run';
export type { FencedBody, FencedRefusal, FencedRenewal, FencedRun, FencedRunLog } from './fenced-run';
