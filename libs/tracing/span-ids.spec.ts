import { randomFillSync } from 'node:crypto';
import { PooledIdGenerator } from './span-ids';

describe('PooledIdGenerator', () => {
  it('makes lower-case hex ids of 16 bytes (trace) and 8 bytes (span), all different', () => {
    const ids = new PooledIdGenerator();
    const traces = Array.from({ length: 1000 }, () => ids.generateTraceId());
    const spans = Array.from({ length: 1000 }, () => ids.generateSpanId());
    for (const t of traces) expect(t).toMatch(/^[0-9a-f]{32}$/);
    for (const s of spans) expect(s).toMatch(/^[0-9a-f]{16}$/);
    expect(new Set(traces).size).toBe(1000);
    expect(new Set(spans).size).toBe(1000);
  });

  it('never answers an all-zero id (invalid): such a draw is taken again', () => {
    let fills = 0;
    // The first block is all zeros; the next is random.
    const ids = new PooledIdGenerator((pool) => (fills++ === 0 ? pool.fill(0) : randomFillSync(pool)));
    const id = ids.generateSpanId();
    expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(id).not.toBe('0'.repeat(16));
    expect(fills).toBe(2);
  });
});
