import { BatchedLines, configureLogging } from '../logging';
import { LoggingAuditSink } from './audit-sink';

describe('LoggingAuditSink', () => {
  afterEach(() => configureLogging('info'));

  it('writes its records whatever the log level filters away', () => {
    configureLogging('warn');
    const sink = new LoggingAuditSink();
    const audit = (sink as unknown as { audit: { log: { isLevelEnabled(level: string): boolean } } }).audit;
    expect(audit.log.isLevelEnabled('info')).toBe(true);
  });
});

describe('BatchedLines', () => {
  it('holds whole lines and writes them in one chunk when flushed, or at once past 16 KiB', () => {
    const chunks: string[] = [];
    const lines = new BatchedLines({ write: (chunk: string) => chunks.push(chunk) });
    lines.write('{"a":1}\n');
    lines.write('{"a":2}\n');
    expect(chunks).toEqual([]);
    lines.flush();
    expect(chunks).toEqual(['{"a":1}\n{"a":2}\n']);
    lines.flush();
    expect(chunks).toHaveLength(1);
    const big = `${'x'.repeat(9000)}\n`;
    lines.write(big);
    expect(chunks).toHaveLength(1);
    lines.write(big);
    expect(chunks).toEqual(['{"a":1}\n{"a":2}\n', big + big]);
  });
});
