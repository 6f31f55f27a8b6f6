export { HealthService } from './health.service';
export type { HealthFinding, HealthReport, LivenessReport, ReadinessReport } from './health.service';
export { skippedEventsFinding } from './skipped-events';
