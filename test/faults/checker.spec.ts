import { check, formatTable, PublishRecord, SubscriptionLog } from './checker';

const pub = (id: string, key: string, seq: number, acknowledged = true): PublishRecord => ({
  id,
  key,
  seq,
  acknowledged,
});
const sub = (ids: string[], ordered = true, name = 's'): SubscriptionLog => ({
  name,
  transport: ordered ? 'webhook' : 'websocket',
  ordered,
  deliveries: ids.map((id) => ({ id })),
});

describe('fault checker', () => {
  const published = [
    pub('a1', 'a', 1),
    pub('a2', 'a', 2),
    pub('a3', 'a', 3),
    pub('b1', 'b', 1),
    pub('b2', 'b', 2, false),
  ];

  it('finds nothing wrong in a clean history', () => {
    const result = check(published, [sub(['a1', 'b1', 'a2', 'a3'])]);
    expect(result).toMatchObject({
      published: 5,
      acknowledged: 4,
      lost: 0,
      duplicates: 0,
      orderViolations: 0,
      valid: true,
    });
    expect(result.subscriptions[0]).toMatchObject({ delivered: 4, unacknowledgedDelivered: 0, unknown: 0 });
  });

  it('counts an acknowledged event never delivered as lost, per subscription', () => {
    const result = check(published, [
      sub(['a1', 'a2', 'a3', 'b1'], true, 'full'),
      sub(['a1', 'a3', 'b1'], true, 'gap'),
    ]);
    expect(result.lost).toBe(1);
    expect(result.valid).toBe(false);
    expect(result.subscriptions.map((s) => [s.name, s.lost, s.lostSample])).toEqual([
      ['full', 0, []],
      ['gap', 1, ['a2']],
    ]);
  });

  it('does not count an unacknowledged event as lost, and counts it when it arrives anyway', () => {
    expect(check(published, [sub(['a1', 'a2', 'a3', 'b1'])]).subscriptions[0].unacknowledgedDelivered).toBe(0);
    const result = check(published, [sub(['a1', 'a2', 'a3', 'b1', 'b2'])]);
    expect(result.subscriptions[0]).toMatchObject({ lost: 0, unacknowledgedDelivered: 1 });
    expect(result.valid).toBe(true);
  });

  it('counts duplicates and does not take a redelivery of an earlier event for an order violation', () => {
    // After a crash the runtime redelivers from the committed offset: a1, a2 again after a3.
    const result = check(published, [sub(['a1', 'a2', 'a3', 'a1', 'a2', 'b1', 'b1'])]);
    expect(result).toMatchObject({ duplicates: 3, orderViolations: 0, lost: 0, valid: true });
  });

  it('finds a first delivery of a key after a later one where order is promised, and only there', () => {
    const out = ['a1', 'a3', 'a2', 'b1'];
    const ordered = check(published, [sub(out, true)]);
    expect(ordered.orderViolations).toBe(1);
    expect(ordered.subscriptions[0].orderSample).toEqual(['a: seq 2 after seq 3']);
    expect(ordered.valid).toBe(false);
    const unordered = check(published, [sub(out, false)]);
    expect(unordered.subscriptions[0].orderViolations).toBeNull();
    expect(unordered).toMatchObject({ orderViolations: 0, valid: true });
  });

  it('takes order per key: interleaved keys are in order', () => {
    expect(check(published, [sub(['b1', 'a1', 'a2', 'a3'])]).orderViolations).toBe(0);
  });

  it('ignores unacknowledged events in the order check', () => {
    const withUnacked = [pub('c1', 'c', 1), pub('c2', 'c', 2, false), pub('c3', 'c', 3)];
    // c2 was not acknowledged (its produce may have landed late); its position says nothing about the runtime.
    expect(check(withUnacked, [sub(['c1', 'c3', 'c2'])]).orderViolations).toBe(0);
  });

  it('reports deliveries of events this workload never published as unknown, and invalid', () => {
    const result = check(published, [sub(['a1', 'a2', 'a3', 'b1', 'zz'])]);
    expect(result.subscriptions[0].unknown).toBe(1);
    expect(result.valid).toBe(false);
  });

  it('merges the attempts of one id: acknowledged if any attempt was', () => {
    const result = check([pub('x', 'k', 1, false), pub('x', 'k', 1, true)], [sub([])]);
    expect(result).toMatchObject({ published: 1, acknowledged: 1, lost: 1 });
  });

  it('prints a table with a row per subscription and the lost ids', () => {
    const table = formatTable(
      check(published, [sub(['a1', 'a3', 'b1'], true, 'hook-1'), sub(['a1', 'a2', 'a3', 'b1'], false, 'ws-1')]),
    );
    expect(table).toContain('| hook-1 | webhook | 4 | 3 | 1 | 0 | 0 | 0 | 0 |');
    expect(table).toContain('| ws-1 | websocket | 4 | 4 | 0 | 0 | n/a | 0 | 0 |');
    expect(table).toContain('lost at hook-1: a2');
    expect(table).toContain('INVALID');
  });
});
