export * from './audit-sink';
export * from './caller';
export * from './gate-filter';
export * from './request-id';
export * from './security-gate';
export * from './gates';
export * from './cloudevents-audit-sink';
