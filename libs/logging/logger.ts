import pino, { Logger } from 'pino';
import { prettyFactory } from 'pino-pretty';
import type { LoggerService } from '@nestjs/common';
import { redactUrl } from './redact-url';

/**
 * Structured logs (pino): JSON lines, or human-readable ones (pino-pretty) on a terminal. One root logger per
 * process; each class takes a child named after itself, and adds topic/partition/offset, subscription and
 * correlation ids as fields where they apply.
 */
/**
 * Fields every logger redacts, whoever logs them: a webhook sink's URL (`sink`) loses its userinfo and its query
 * values (redact-url.ts), so no log line carries the credentials a tenant put in its sink URL.
 */
const serializers = { sink: redactUrl };

let root: Logger = pino({ level: 'info', base: undefined, timestamp: pino.stdTimeFunctions.isoTime, serializers });

export type { Logger };

let auditLevel = 'info';
let rootBase: Record<string, unknown> | undefined;

/** Where whole lines go: standard output as is (JSON), or through pino-pretty (pretty). */
interface LineOutput {
  write(chunk: string): unknown;
}
let lines: LineOutput = process.stdout;

/** `auto`: pretty when standard output is a terminal (`npm start` in a shell), JSON otherwise (a pipe, a file, a container log). */
export function resolveLogFormat(
  format: 'json' | 'pretty' | 'auto',
  isTerminal = process.stdout.isTTY === true,
): 'json' | 'pretty' {
  return format === 'auto' ? (isTerminal ? 'pretty' : 'json') : format;
}

/** Writes JSON lines as pino-pretty shows them (the instance id left out), synchronously, one write per line. */
export function prettyLines(out: LineOutput = process.stdout, colorize?: boolean): LineOutput {
  // One line per entry: `[10:00:00.000] WARN: DispatchLoop: delivery failed; retrying {"subscription":"s-1",...}`.
  const pretty = prettyFactory({
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,instance,logger',
    messageFormat: '{if logger}{logger}: {end}{msg}',
    singleLine: true,
    ...(colorize === undefined ? {} : { colorize }),
  });
  return {
    write(chunk: string) {
      for (const line of chunk.split('\n')) if (line !== '') out.write(pretty(line));
      return true;
    },
  };
}

/**
 * `auditLevel`: the level of the audit log (the gate's logging sink), which EVENTMESH_LOG_LEVEL does not filter:
 * an audit is not a diagnostic. Only tests turn it down. `format`: EVENTMESH_LOG_FORMAT; every line of the process
 * (logs, audit and access lines) is written in it.
 */
export function configureLogging(
  level: string,
  base: Record<string, unknown> = {},
  audit = 'info',
  format: 'json' | 'pretty' | 'auto' = 'json',
): Logger {
  const pretty = resolveLogFormat(format) === 'pretty';
  lines = pretty ? prettyLines() : process.stdout;
  const options = { level, base, timestamp: pino.stdTimeFunctions.isoTime, serializers };
  root = pretty ? pino(options, lines) : pino(options);
  rootBase = base;
  auditLevel = audit;
  return root;
}

/** Most bytes of audit lines held before they are written. */
const AUDIT_BATCH_BYTES = 16 * 1024;
/** Longest an audit line waits to be written. */
const AUDIT_BATCH_MS = 100;

/**
 * Audit lines, written to standard output in batches: one write per 16 KiB or 100 ms rather than one per line,
 * since a write per request (one audit line per publish) cost the gateway as much as the gate itself. Each batch
 * is whole lines, written with `process.stdout.write` (synchronous for files and pipes on Linux, so lines never
 * interleave with the other logs, and a slow reader blocks rather than being slept on), and what is held is written
 * when the process exits. A crash loses at most the last 100 ms of audit lines.
 */
export class BatchedLines {
  private lines: string[] = [];
  private bytes = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly out: LineOutput = { write: (chunk) => lines.write(chunk) }) {
    this.timer = setInterval(() => this.flush(), AUDIT_BATCH_MS);
    this.timer.unref();
    process.once('exit', () => this.flush());
  }

  write(line: string): void {
    this.lines.push(line);
    this.bytes += line.length;
    if (this.bytes >= AUDIT_BATCH_BYTES) this.flush();
  }

  flush(): void {
    if (this.lines.length === 0) return;
    const chunk = this.lines.join('');
    this.lines = [];
    this.bytes = 0;
    this.out.write(chunk);
  }
}

let auditLines: BatchedLines | undefined;

/** The batched lines of the process (audit and access lines share them). */
export function sharedLines(): BatchedLines {
  return (auditLines ??= new BatchedLines());
}

/** The root logger's level name. */
export function rootLevel(): string {
  return root.level;
}

/** The root logger's base fields as JSON members with a trailing comma (`"instance":"i-1",`), or '' when none. */
export function rootBaseJson(): string {
  return rootBase && Object.keys(rootBase).length > 0 ? `${JSON.stringify(rootBase).slice(1, -1)},` : '';
}

/** The audit log as the gate's logging sink writes it (createAuditLog). */
export interface AuditLog {
  /** Whether audit lines are written at all (tests turn them off). */
  readonly enabled: boolean;
  /**
   * Writes one line `{"level":30,"time",...base,"logger":"Audit","audit":<record>,"msg":"gate decision"}`, the
   * record given as its JSON (the sink serializes it: audit-sink.ts).
   */
  write(time: string, recordJson: string): void;
  /** Writes what is held (shutdown). */
  flush(): void;
}

/**
 * The audit log: lines in the root logger's shape (level 30, time, its base fields, logger `Audit`), whatever
 * EVENTMESH_LOG_LEVEL filters, written in batches (BatchedLines). The line is put together from the record's JSON
 * rather than through pino's serializer: it is written once per request, and that was most of its cost.
 */
export function createAuditLog(): AuditLog {
  const lines = sharedLines();
  const enabled =
    pino.levels.values[auditLevel] !== undefined && pino.levels.values[auditLevel] <= pino.levels.values.info;
  const base = rootBaseJson();
  return {
    enabled,
    write(time, recordJson) {
      if (!enabled) return;
      lines.write(
        `{"level":30,"time":${JSON.stringify(time)},${base}"logger":"Audit","audit":${recordJson},"msg":"gate decision"}\n`,
      );
    },
    flush: () => lines.flush(),
  };
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
