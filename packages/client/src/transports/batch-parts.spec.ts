import type { Answer } from './connection';
import { BatchParts } from './batch-parts';

describe('BatchParts', () => {
  const event = (id: string) => ({ specversion: '1.0', id, source: '/t', type: 't' }) as never;

  function parts(accept = true) {
    const sent: Answer[] = [];
    const p = new BatchParts(async (a) => (sent.push(a), accept));
    return { p, sent };
  }

  it("hands a batch's events over as parts and answers the batch once, ack when every part was acked", async () => {
    const { p, sent } = parts();
    const split = p.split('4.n.9', [event('a'), event('b'), event('c')]);
    expect(split.map((d) => d.deliveryId)).toEqual(['4.n.9#0', '4.n.9#1', '4.n.9#2']);
    expect(split.map((d) => (d.event as { id: string }).id)).toEqual(['a', 'b', 'c']);
    const answers = [
      p.answer({ deliveryId: '4.n.9#2', action: 'ack' }),
      p.answer({ deliveryId: '4.n.9#0', action: 'ack' }),
    ];
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual([]);
    answers.push(p.answer({ deliveryId: '4.n.9#1', action: 'ack' }));
    expect(await Promise.all(answers)).toEqual([true, true, true]);
    expect(sent).toEqual([{ deliveryId: '4.n.9', action: 'ack' }]);
  });

  it('rejects the batch with the first reason when a part is rejected; nacks it with the longest delay when one is nacked', async () => {
    const { p, sent } = parts();
    p.split('b1', [event('a'), event('b'), event('c')]);
    const nacked = p.answer({ deliveryId: 'b1#0', action: 'nack', delayMs: 500 });
    const rejected = p.answer({ deliveryId: 'b1#1', action: 'reject', reason: 'b is bad' });
    const acked = p.answer({ deliveryId: 'b1#2', action: 'ack' });
    // Taken as the batch's reject: only the rejected part's answer was the runtime's verdict on it.
    expect(await Promise.all([nacked, rejected, acked])).toEqual([false, true, false]);
    p.split('b2', [event('a'), event('b')]);
    void p.answer({ deliveryId: 'b2#0', action: 'nack', delayMs: 500 });
    await p.answer({ deliveryId: 'b2#1', action: 'nack', delayMs: 2000 });
    expect(sent).toEqual([
      { deliveryId: 'b1', action: 'reject', reason: 'b is bad' },
      { deliveryId: 'b2', action: 'nack', delayMs: 2000 },
    ]);
  });

  it("tells every part the runtime's verdict: a stale batch is false for all of them", async () => {
    const { p } = parts(false);
    p.split('b1', [event('a'), event('b')]);
    const answers = [p.answer({ deliveryId: 'b1#0', action: 'ack' }), p.answer({ deliveryId: 'b1#1', action: 'ack' })];
    expect(await Promise.all(answers)).toEqual([false, false]);
  });

  it("forwards an extension of any part as the batch's once it reaches a third of its length further; ignores a part answered twice", async () => {
    const { p, sent } = parts();
    p.split('b1', [event('a'), event('b')]);
    await p.answer({ deliveryId: 'b1#0', action: 'extend', deadlineMs: 30_000 });
    await p.answer({ deliveryId: 'b1#1', action: 'extend', deadlineMs: 30_000 });
    // A shorter one does not shorten it; a longer one goes.
    await p.answer({ deliveryId: 'b1#1', action: 'extend', deadlineMs: 10_000 });
    await p.answer({ deliveryId: 'b1#1', action: 'extend', deadlineMs: 90_000 });
    expect(sent).toEqual([
      { deliveryId: 'b1', action: 'extend', deadlineMs: 30_000 },
      { deliveryId: 'b1', action: 'extend', deadlineMs: 90_000 },
    ]);
    void p.answer({ deliveryId: 'b1#0', action: 'ack' });
    expect(await p.answer({ deliveryId: 'b1#0', action: 'reject', reason: 'late' })).toBe(false);
    expect(await p.answer({ deliveryId: 'b1#7', action: 'ack' })).toBe(false);
  });

  it('leaves answers to deliveries that are not parts to the caller, and settles parts left when the connection ends', async () => {
    const { p, sent } = parts();
    expect(p.answer({ deliveryId: '4.n.1', action: 'ack' })).toBeUndefined();
    expect(p.answer({ deliveryId: 'unknown#0', action: 'ack' })).toBeUndefined();
    p.split('b1', [event('a'), event('b')]);
    const first = p.answer({ deliveryId: 'b1#0', action: 'ack' });
    p.close();
    expect(await first).toBe(false);
    expect(sent).toEqual([]);
  });

  it('extends a batch from its arrival until it is answered, by the deadline it is given, as one batch', async () => {
    const sent: Answer[] = [];
    const p = new BatchParts(async (a) => (sent.push(a), true), Promise.resolve(60));
    p.split('b1', [event('a'), event('b')]);
    await new Promise((r) => setTimeout(r, 130));
    const extends1 = sent.filter((a) => a.action === 'extend');
    expect(extends1.length).toBeGreaterThanOrEqual(2);
    expect(new Set(extends1.map((a) => `${a.deliveryId} ${a.deadlineMs}`))).toEqual(new Set(['b1 60']));
    await Promise.all([
      p.answer({ deliveryId: 'b1#0', action: 'ack' }),
      p.answer({ deliveryId: 'b1#1', action: 'ack' }),
    ]);
    const after = sent.length;
    await new Promise((r) => setTimeout(r, 80));
    expect(sent.length).toBe(after);
  });
});
