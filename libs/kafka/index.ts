export * from './kafka-client';
export * from './topic-admin';
export * from './event-producer';
export * from './partition-reader';
export * from './kafka-unavailable';
export * from './topic-creation';
export * from './runtime-topics';
