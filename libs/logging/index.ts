export * from './logger';
export * from './access-log';
