import { configureLogging } from '../logging';
import { LoggingAuditSink } from './audit-sink';

describe('LoggingAuditSink', () => {
  afterEach(() => configureLogging('info'));

  it('writes its records whatever the log level filters away', () => {
    configureLogging('warn');
    const sink = new LoggingAuditSink();
    const log = (sink as unknown as { log: { isLevelEnabled(level: string): boolean } }).log;
    expect(log.isLevelEnabled('info')).toBe(true);
  });
});
