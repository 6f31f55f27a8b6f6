import { CoalescingRenewal } from './coalescing-renewal';

describe('CoalescingRenewal', () => {
  it('writes one at a time: changes during a write make one more write, none after close', async () => {
    const done: (() => void)[] = [];
    let writes = 0;
    const renewal = new CoalescingRenewal('test rows', 60_000, () => {
      writes++;
      return new Promise<void>((resolve) => done.push(resolve));
    });
    renewal.renew();
    renewal.renew();
    renewal.renew();
    expect(writes).toBe(1);
    done.shift()!();
    await new Promise((r) => setImmediate(r));
    expect(writes).toBe(2);
    renewal.renew();
    const closed = renewal.close();
    done.shift()!();
    await closed;
    expect(writes).toBe(2);
  });

  it('goes on after a failed write (retried at the next renewal)', async () => {
    let writes = 0;
    const renewal = new CoalescingRenewal('test rows', 60_000, () =>
      ++writes === 1 ? Promise.reject(new Error('down')) : Promise.resolve(),
    );
    renewal.renew();
    await new Promise((r) => setImmediate(r));
    renewal.renew();
    await renewal.close();
    expect(writes).toBe(2);
  });
});
