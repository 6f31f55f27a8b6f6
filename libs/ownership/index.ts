export { OwnershipAgent } from './ownership-agent';
export { OwnershipAdmin, endOwnershipWorkflows } from './ownership-admin';
export type { PartitionsView } from './ownership-admin';
export { LivenessLock, livenessTimingFor } from './liveness-lock';
export { CrashWatch } from './crash-watch';
