import pino from 'pino';
import { prettyLines, resolveLogFormat } from './logger';

describe('log format', () => {
  it('auto is pretty on a terminal and JSON elsewhere; json and pretty are what they say', () => {
    expect([resolveLogFormat('auto', true), resolveLogFormat('auto', false)]).toEqual(['pretty', 'json']);
    expect([resolveLogFormat('json', true), resolveLogFormat('pretty', false)]).toEqual(['json', 'pretty']);
  });

  it('pretty writes each JSON line as a human-readable one: time, level, logger, message, then the fields', () => {
    const out: string[] = [];
    const pretty = prettyLines({ write: (s: string) => out.push(s) }, false);
    const log = pino({ level: 'info', base: { instance: 'i-1' }, timestamp: pino.stdTimeFunctions.isoTime }, pretty);
    log.child({ logger: 'DispatchLoop' }).warn({ subscription: 's-1', offset: 7 }, 'delivery failed; retrying');
    // Lines written by hand (audit, access) in one batch of two.
    pretty.write(
      '{"level":30,"time":"2026-12-01T10:00:00.000Z","logger":"Access","status":202,"msg":"request"}\n{"level":50,"time":"2026-12-01T10:00:00.000Z","logger":"Access","status":503,"msg":"request"}\n',
    );
    expect(out).toHaveLength(3);
    expect(out[0]).toMatch(
      /^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: DispatchLoop: delivery failed; retrying \{"subscription":"s-1","offset":7\}\n$/,
    );
    expect(out[1]).toMatch(/ INFO: Access: request \{"status":202\}\n$/);
    expect(out[2]).toMatch(/ ERROR: Access: request \{"status":503\}\n$/);
    for (const line of out) expect(() => JSON.parse(line) as unknown).toThrow();
  });
});
