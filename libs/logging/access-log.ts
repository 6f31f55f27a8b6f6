import pino from 'pino';
import { BatchedLines, rootLevel, rootBaseJson, sharedLines } from './logger';
import { isoNow } from './iso-now';

/** Which requests get an access line (EVENTMESH_LOG_ACCESS). */
export type AccessLogMode = 'all' | 'errors' | 'off';

/** One answered HTTP request, as its access line says it. */
export interface AccessRecord {
  requestId: string;
  method: string;
  /** The path without its query (a query may carry what a log must not). */
  path: string;
  status: number;
  durationMs: number;
  /** The client went away before the answer was written whole. */
  aborted: boolean;
}

export interface AccessLog {
  /** Whether a request answered with `status` gets a line (the mode and the log level). */
  wants(status: number): boolean;
  write(record: AccessRecord): void;
}

const MAX_PATH_CHARS = 512;

/**
 * The gateway's access log: one line per answered request, `{"level":30,"time",...base,"logger":"Access",
 * "requestId","method","path","status","durationMs","msg":"request"}` (level 50 for a 5xx), written in batches with
 * the audit lines (BatchedLines: the publish route answers tens of thousands of requests a second, and a write per
 * line would cost more than the request). The line is put together by hand for the same reason. Its level is
 * filtered like any other line's (EVENTMESH_LOG_LEVEL).
 */
export function createAccessLog(mode: AccessLogMode, lines: BatchedLines = sharedLines()): AccessLog {
  const level = pino.levels.values[rootLevel()] ?? pino.levels.values.info;
  const info = mode === 'all' && level <= pino.levels.values.info;
  const clientErrors = mode !== 'off' && level <= pino.levels.values.info;
  const serverErrors = mode !== 'off' && level <= pino.levels.values.error;
  const base = rootBaseJson();
  return {
    wants: (status) => (status >= 500 ? serverErrors : status >= 400 ? clientErrors : info),
    write(r) {
      const path = r.path.length > MAX_PATH_CHARS ? `${r.path.slice(0, MAX_PATH_CHARS)}...` : r.path;
      lines.write(
        `{"level":${r.status >= 500 ? 50 : 30},"time":"${isoNow()}",${base}"logger":"Access","requestId":"${r.requestId}","method":"${r.method}",` +
          `"path":${JSON.stringify(path)},"status":${r.status},"durationMs":${Math.round(r.durationMs * 100) / 100}${r.aborted ? ',"aborted":true' : ''},"msg":"request"}\n`,
      );
    },
  };
}
