export * from './eventmesh-error';
export * from './query-params';
