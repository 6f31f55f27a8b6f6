export * from './health.service';
export * from './skipped-events';
