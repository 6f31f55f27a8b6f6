export * from './health.service';
