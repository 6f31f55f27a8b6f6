import { SharedRead } from './shared-read';

describe('SharedRead', () => {
  let now = 0;
  const clock = () => now;

  it('shares one read between the callers while it runs, and its answer for the TTL', async () => {
    let reads = 0;
    let finish: (v: number) => void = () => undefined;
    const shared = new SharedRead(
      () => {
        reads++;
        return new Promise<number>((resolve) => (finish = resolve));
      },
      1000,
      clock,
    );
    const waiting = [shared.get(), shared.get(), shared.get()];
    expect(reads).toBe(1);
    finish(7);
    expect(await Promise.all(waiting)).toEqual([7, 7, 7]);
    now += 999;
    expect(await shared.get()).toBe(7);
    expect(reads).toBe(1);
    now += 1;
    const next = shared.get();
    expect(reads).toBe(2);
    finish(8);
    expect(await next).toBe(8);
  });

  it('keeps no failure: the callers that waited get it, the next caller reads again', async () => {
    let reads = 0;
    const shared = new SharedRead(
      () => (++reads === 1 ? Promise.reject(new Error('down')) : Promise.resolve(reads)),
      1000,
      clock,
    );
    await expect(Promise.all([shared.get(), shared.get()])).rejects.toThrow('down');
    expect(reads).toBe(1);
    expect(await shared.get()).toBe(2);
  });

  it('with a TTL of 0 reads again for each caller after a read finished', async () => {
    let reads = 0;
    const shared = new SharedRead(() => Promise.resolve(++reads), 0, clock);
    expect(await shared.get()).toBe(1);
    expect(await shared.get()).toBe(2);
  });
});
