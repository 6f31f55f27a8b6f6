import pino, { Logger } from 'pino';
import type { LoggerService } from '@nestjs/common';

/**
 * Structured JSON logs (pino). One root logger per process; each class takes a child named after itself, and
 * adds topic/partition/offset, subscription and correlation ids as fields where they apply.
 */
let root: Logger = pino({ level: 'info', base: undefined, timestamp: pino.stdTimeFunctions.isoTime });

export type { Logger };

let auditLevel = 'info';

/**
 * `auditLevel`: the level of the audit log (the gate's logging sink), which EVENTMESH_LOG_LEVEL does not filter:
 * an audit is not a diagnostic. Only tests turn it down.
 */
export function configureLogging(level: string, base: Record<string, unknown> = {}, audit = 'info'): Logger {
  root = pino({ level, base, timestamp: pino.stdTimeFunctions.isoTime });
  auditLevel = audit;
  return root;
}

/** The audit log: the root logger's output, at the audit level whatever the root level. */
export function createAuditLogger(): Logger {
  const log = root.child({ logger: 'Audit' });
  log.level = auditLevel;
  return log;
}

export function createLogger(name: string, fields: Record<string, unknown> = {}): Logger {
  return root.child({ logger: name, ...fields });
}

/** Lets Nest (and its framework messages) write through the same structured logger. */
export class NestPinoLogger implements LoggerService {
  private readonly logger = createLogger('nest');
  log(message: unknown, context?: string): void {
    this.logger.info({ context }, String(message));
  }
  error(message: unknown, trace?: string, context?: string): void {
    this.logger.error({ context, trace }, String(message));
  }
  warn(message: unknown, context?: string): void {
    this.logger.warn({ context }, String(message));
  }
  debug(message: unknown, context?: string): void {
    this.logger.debug({ context }, String(message));
  }
  verbose(message: unknown, context?: string): void {
    this.logger.trace({ context }, String(message));
  }
}
