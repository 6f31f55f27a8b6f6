export * from './logger';
export * from './access-log';
export * from './iso-now';
