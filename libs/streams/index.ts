export * from './stream-hub';
export * from './sink-router';
export * from './poll-consumers';
export * from './stream-access';
