import { BatchedLines, configureLogging, createAuditLog } from '../logging';
import { LoggingAuditSink } from './audit-sink';

describe('LoggingAuditSink', () => {
  afterEach(() => configureLogging('info'));

  it('writes its records whatever the log level filters away', () => {
    configureLogging('warn');
    const sink = new LoggingAuditSink();
    expect((sink as unknown as { audit: { enabled: boolean } }).audit.enabled).toBe(true);
    configureLogging('warn', {}, 'silent');
    expect((new LoggingAuditSink() as unknown as { audit: { enabled: boolean } }).audit.enabled).toBe(false);
  });
});

describe('createAuditLog', () => {
  afterEach(() => configureLogging('info'));

  it('writes a line of the root logger\'s shape: JSON, level, time, base fields, logger, the record, msg', () => {
    configureLogging('warn', { instance: 'i-1' });
    const written: string[] = [];
    const log = createAuditLog();
    const spy = jest.spyOn(BatchedLines.prototype, 'write').mockImplementation((line: string) => void written.push(line));
    try {
      log.write({ time: '2026-12-01T09:00:00.000Z', decision: 'allow', route: 'POST /events/publish "x"' } as never);
    } finally {
      spy.mockRestore();
    }
    expect(written).toHaveLength(1);
    expect(written[0].endsWith('\n')).toBe(true);
    expect(JSON.parse(written[0])).toEqual({
      level: 30,
      time: '2026-12-01T09:00:00.000Z',
      instance: 'i-1',
      logger: 'Audit',
      audit: { time: '2026-12-01T09:00:00.000Z', decision: 'allow', route: 'POST /events/publish "x"' },
      msg: 'gate decision',
    });
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
