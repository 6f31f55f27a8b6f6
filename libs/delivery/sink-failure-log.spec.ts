import pino from 'pino';
import { SinkFailureLog } from './sink-failure-log';

/** A real pino logger whose lines are kept. */
function capture() {
  const lines: Record<string, unknown>[] = [];
  const log = pino(
    { level: 'info', base: undefined },
    { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { lines, log };
}

describe('SinkFailureLog', () => {
  const PERIOD = 60_000;
  let now = 1_000_000;
  const clock = () => now;
  const at = (offset: number) => ({
    subscription: 's-1',
    topic: 't',
    partition: 0,
    offset,
    eventId: `e-${offset}`,
    error: 'HTTP 503',
  });

  beforeEach(() => {
    now = 1_000_000;
  });

  it("logs a sink's first failure in full, then one summary line per period with the counts", () => {
    const { lines, log } = capture();
    const failures = new SinkFailureLog(log, PERIOD, clock);
    for (let i = 0; i < 100; i++) {
      failures.failed('s-1', 'http://sink', i === 99 ? 'parked' : 'retrying', at(i), 'delivery failed; retrying');
      now += 100;
      failures.tick();
    }
    // 100 attempts over 10 s: the first only.
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 40,
      msg: 'delivery failed; retrying',
      offset: 0,
      sink: 'http://sink',
      outcome: 'retrying',
    });
    now = 1_000_000 + PERIOD;
    failures.tick();
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({
      level: 40,
      subscription: 's-1',
      sink: 'http://sink',
      failures: 99,
      retrying: 98,
      parked: 1,
      deadLettered: 0,
      last: { offset: 99 },
    });
    // Still failing: counted again, summarised at the end of the next period.
    failures.failed(
      's-1',
      'http://sink',
      'deadLettered',
      at(100),
      'delivery failed for the last time; moved to the dead-letter queue',
    );
    failures.tick();
    expect(lines).toHaveLength(2);
    now += PERIOD;
    failures.tick();
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatchObject({ level: 50, failures: 1, deadLettered: 1, periodMs: PERIOD });
  });

  it('forgets a sink after a period without failures: its next failure is logged in full again', () => {
    const { lines, log } = capture();
    const failures = new SinkFailureLog(log, PERIOD, clock);
    failures.failed('s-1', 'http://sink', 'retrying', at(0), 'delivery failed; retrying');
    now += PERIOD;
    failures.tick();
    expect(lines).toHaveLength(1);
    failures.failed('s-1', 'http://sink', 'retrying', at(1), 'delivery failed; retrying');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ msg: 'delivery failed; retrying', offset: 1 });
  });

  it("keeps each subscription's sink apart, and says what is pending when flushed", () => {
    const { lines, log } = capture();
    const failures = new SinkFailureLog(log, PERIOD, clock);
    for (let i = 0; i < 3; i++) {
      failures.failed('s-1', 'http://a', 'retrying', at(i), 'delivery failed; retrying');
      failures.failed('s-2', 'http://b', 'retrying', { ...at(i), subscription: 's-2' }, 'delivery failed; retrying');
    }
    expect(lines.map((l) => l.subscription)).toEqual(['s-1', 's-2']);
    failures.flush();
    expect(lines.slice(2).map((l) => [l.subscription, l.failures])).toEqual([
      ['s-1', 2],
      ['s-2', 2],
    ]);
    failures.flush();
    expect(lines).toHaveLength(4);
  });
});
