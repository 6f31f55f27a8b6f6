export * from './logger';
export * from './access-log';
export * from './iso-now';
export * from './redact-url';
