import { CreditWindow } from './credit-window';

describe('CreditWindow', () => {
  it('takes chunks while they fit in the window, and refuses the one that does not', () => {
    const w = new CreditWindow(100, 40);
    expect(w.take(40)).toBe(true);
    expect(w.take(40)).toBe(true);
    expect(w.available).toBe(20);
    expect(w.take(21)).toBe(false);
    expect(w.held).toBe(80);
    expect(w.take(20)).toBe(true);
    expect(w.available).toBe(0);
  });

  it('gives back what the reader consumed, never more than is in flight (a reader cannot widen the window)', () => {
    const w = new CreditWindow(100, 10);
    w.take(30);
    expect(w.give(50)).toBe(30);
    expect(w.available).toBe(100);
    expect(w.give(10)).toBe(0);
    expect(w.give(-5)).toBe(0);
    expect(w.give(Number.NaN)).toBe(0);
  });

  it('holds at most the window whatever the order of takes and gives', () => {
    const w = new CreditWindow(1000, 100);
    let held = 0;
    for (let i = 0; i < 10_000; i++) {
      const n = (i * 7919) % 150;
      if (i % 3 === 0) held -= w.give((i * 104729) % 300);
      else if (w.take(n)) held += n;
      expect(w.held).toBe(held);
      expect(held).toBeLessThanOrEqual(1000);
      expect(held).toBeGreaterThanOrEqual(0);
    }
  });

  it('counts a stall once each time the credit falls below one largest chunk', () => {
    const w = new CreditWindow(100, 30);
    w.take(60);
    expect(w.stalls).toBe(0);
    w.take(20); // 20 left < 30
    expect(w.stalls).toBe(1);
    w.take(10);
    expect(w.stalls).toBe(1);
    w.give(90);
    w.take(80);
    expect(w.stalls).toBe(2);
  });
});
