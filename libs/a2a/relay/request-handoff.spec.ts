import type { EventFrame } from '@libs/frame';
import { RequestHandoff } from './request-handoff';

const frame = (id: string): EventFrame => ({ id, source: '/s', type: 't', extensions: {} });
const record = (offset: number) => ({ topic: 'a2a.t.a.requests', partition: 0, offset });

describe('RequestHandoff', () => {
  afterEach(() => jest.useRealTimers());

  it('hands a request to one delivery, once', () => {
    const handoff = new RequestHandoff();
    handoff.put(record(1), frame('a'));
    expect(handoff.take(record(2))).toBeUndefined();
    expect(handoff.take(record(1))?.id).toBe('a');
    expect(handoff.take(record(1))).toBeUndefined();
  });

  it('drops a request not taken within 10 s (its delivery reads Kafka)', () => {
    jest.useFakeTimers({ now: 1_000_000 });
    const handoff = new RequestHandoff();
    handoff.put(record(1), frame('a'));
    handoff.put(record(2), frame('b'));
    jest.setSystemTime(1_000_000 + 9_999);
    expect(handoff.take(record(1))?.id).toBe('a');
    jest.setSystemTime(1_000_000 + 10_000);
    expect(handoff.take(record(2))).toBeUndefined();
    // An expired one is let go when the next is put.
    handoff.put(record(3), frame('c'));
    jest.setSystemTime(1_000_000 + 20_001);
    handoff.put(record(4), frame('d'));
    expect(handoff.size).toBe(1);
  });

  it('holds at most 1000, the oldest going first', () => {
    const handoff = new RequestHandoff();
    for (let i = 0; i < 1001; i++) handoff.put(record(i), frame(String(i)));
    expect(handoff.size).toBe(1000);
    expect(handoff.take(record(0))).toBeUndefined();
    expect(handoff.take(record(1000))?.id).toBe('1000');
  });
});
