import { BatchedLines, configureLogging, createAuditLog } from '@libs/logging';
import fc from 'fast-check';
import { AuditRecord, auditRecordJson, LoggingAuditSink } from './audit-sink';

describe('LoggingAuditSink', () => {
  afterEach(() => configureLogging('info'));

  it('writes its records whatever the log level filters away', () => {
    configureLogging('warn');
    const sink = new LoggingAuditSink();
    expect((sink as unknown as { audit: { enabled: boolean } }).audit.enabled).toBe(true);
    configureLogging('warn', {}, 'silent');
    expect((new LoggingAuditSink() as unknown as { audit: { enabled: boolean } }).audit.enabled).toBe(false);
  });

  it('counts a write that throws, is degraded with its reason until a write succeeds, and throws it on', () => {
    const sink = new LoggingAuditSink();
    const audit = (sink as unknown as { audit: { enabled: boolean; write: (time: string, line: string) => void } })
      .audit;
    const write = audit.write.bind(audit);
    const record: AuditRecord = {
      time: '2026-01-01T00:00:00.000Z',
      gate: 'ingress',
      requestId: 'r',
      principal: 'p',
      tenant: 't',
      route: 'POST /events/publish',
      action: 'publish',
      decision: 'deny',
      enforced: true,
      remoteAddress: '127.0.0.1',
    };
    audit.write = () => {
      throw new Error('stdout closed');
    };
    expect(() => sink.record(record)).toThrow('stdout closed');
    expect(sink.stats()).toMatchObject({
      sink: 'LOG',
      status: 'degraded',
      written: 0,
      failed: 1,
      lastFailure: { reason: 'stdout closed' },
    });
    audit.write = () => undefined;
    sink.record(record);
    expect(sink.stats()).toMatchObject({ status: 'up', written: 1, failed: 1 });
    audit.write = write;
  });
});

describe('createAuditLog', () => {
  afterEach(() => configureLogging('info'));

  it("writes a line of the root logger's shape: JSON, level, time, base fields, logger, the record, msg", () => {
    configureLogging('warn', { instance: 'i-1' });
    const written: string[] = [];
    const log = createAuditLog();
    const spy = jest
      .spyOn(BatchedLines.prototype, 'write')
      .mockImplementation((line: string) => void written.push(line));
    try {
      log.write(
        '2026-12-01T09:00:00.000Z',
        JSON.stringify({ time: '2026-12-01T09:00:00.000Z', decision: 'allow', route: 'POST /events/publish "x"' }),
      );
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

describe('auditRecordJson', () => {
  const text = fc.string({ unit: 'binary', maxLength: 40 });
  const records = fc.record(
    {
      time: fc.constant('2026-12-01T09:00:00.000Z'),
      gate: fc.constantFrom('ingress', 'admin'),
      requestId: text,
      principal: text,
      tenant: text,
      route: text,
      action: fc.constantFrom('publish', 'subscribe', 'admin') as fc.Arbitrary<AuditRecord['action']>,
      topic: fc.option(text, { nil: undefined }),
      decision: fc.constantFrom('allow', 'deny') as fc.Arbitrary<AuditRecord['decision']>,
      enforced: fc.boolean(),
      filter: fc.option(text, { nil: undefined }),
      reason: fc.option(text, { nil: undefined }),
      remoteAddress: text,
    },
    {
      requiredKeys: [
        'time',
        'gate',
        'requestId',
        'principal',
        'tenant',
        'route',
        'action',
        'decision',
        'enforced',
        'remoteAddress',
      ],
    },
  );

  it('is JSON.stringify of the record, whatever its strings hold (quotes, control characters, lone surrogates)', () => {
    fc.assert(
      fc.property(records, (r) => {
        expect(auditRecordJson(r)).toBe(JSON.stringify(r));
      }),
      { numRuns: 2000 },
    );
    const tricky = {
      time: 't',
      gate: 'ingress',
      requestId: 'a"b\\c\n',
      principal: '\u2028\ud800',
      tenant: 'é',
      route: '\u007f',
      action: 'publish',
      decision: 'deny',
      enforced: true,
      filter: 'acl',
      reason: '\u0000',
      remoteAddress: '::1',
    } as const;
    expect(auditRecordJson(tricky)).toBe(JSON.stringify(tricky));
  });
});
