export * from './eventmesh-error';
