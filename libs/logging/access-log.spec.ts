import { createAccessLog } from './access-log';
import { BatchedLines, configureLogging } from './logger';

describe('access log', () => {
  const written: string[] = [];
  const lines = new BatchedLines({ write: (chunk: string) => written.push(chunk) });
  const record = {
    requestId: 'r-1',
    method: 'POST',
    path: '/events/publish',
    status: 202,
    durationMs: 0.4567,
    aborted: false,
  };
  const read = () => {
    lines.flush();
    const out = written
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    written.length = 0;
    return out;
  };
  afterEach(() => configureLogging('info'));

  it("writes one JSON line per request in the root logger's shape: request id, method, path, status, duration", () => {
    configureLogging('info', { instance: 'i-1' });
    const log = createAccessLog('all', lines);
    expect([200, 404, 503].map((s) => log.wants(s))).toEqual([true, true, true]);
    log.write(record);
    log.write({ ...record, status: 503, path: '/x"y\n', aborted: true });
    expect(read()).toEqual([
      {
        level: 30,
        time: expect.any(String),
        instance: 'i-1',
        logger: 'Access',
        requestId: 'r-1',
        method: 'POST',
        path: '/events/publish',
        status: 202,
        durationMs: 0.46,
        msg: 'request',
      },
      {
        level: 50,
        time: expect.any(String),
        instance: 'i-1',
        logger: 'Access',
        requestId: 'r-1',
        method: 'POST',
        path: '/x"y\n',
        status: 503,
        durationMs: 0.46,
        aborted: true,
        msg: 'request',
      },
    ]);
  });

  it('takes only the answers its mode and the log level want', () => {
    configureLogging('info');
    expect([200, 404, 503].map((s) => createAccessLog('errors', lines).wants(s))).toEqual([false, true, true]);
    expect([200, 404, 503].map((s) => createAccessLog('off', lines).wants(s))).toEqual([false, false, false]);
    configureLogging('warn');
    expect([200, 404, 503].map((s) => createAccessLog('all', lines).wants(s))).toEqual([false, false, true]);
  });

  it('cuts a long path', () => {
    configureLogging('info');
    createAccessLog('all', lines).write({ ...record, path: `/${'a'.repeat(2000)}` });
    expect((read()[0].path as string).length).toBe(515);
  });
});
