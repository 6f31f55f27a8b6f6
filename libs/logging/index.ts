export {
  BatchedLines,
  NestPinoLogger,
  configureLogging,
  createAuditLog,
  createLogger,
  prettyLines,
  resolveLogFormat,
  rootBaseJson,
  rootLevel,
  sharedLines,
} from './logger';
export type { AuditLog, Logger } from './logger';
export { createAccessLog } from './access-log';
export type { AccessLog, AccessLogMode, AccessRecord } from './access-log';
export { isoNow } from './iso-now';
export { redactUrl } from './redact-url';
