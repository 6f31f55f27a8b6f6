import { RecentReads } from './recent-reads';

describe('RecentReads', () => {
  it('reads a key once within its memory, answers what it read before when a read fails, and forgets on demand', async () => {
    const reads: string[] = [];
    let fail = false;
    const recent = new RecentReads(
      (key) => {
        reads.push(key);
        return fail ? Promise.reject(new Error('down')) : Promise.resolve([`${key}-${reads.length}`]);
      },
      60_000,
      [] as string[],
    );
    expect(await recent.get('a')).toEqual(['a-1']);
    expect(await recent.get('a')).toEqual(['a-1']);
    expect(reads).toEqual(['a']);
    recent.forget('a');
    fail = true;
    expect(await recent.get('a')).toEqual([]);
    fail = false;
    recent.forget('a');
    expect(await recent.get('a')).toEqual(['a-3']);
  });

  it('answers the last good read for a key whose read fails after its memory ran out', async () => {
    let fail = false;
    const recent = new RecentReads(
      () => (fail ? Promise.reject(new Error('down')) : Promise.resolve(['rows'])),
      0,
      [] as string[],
    );
    expect(await recent.get('a')).toEqual(['rows']);
    fail = true;
    expect(await recent.get('a')).toEqual(['rows']);
  });

  it('peeks at a read within its memory once it came back, and at nothing before, after it, or once forgotten', async () => {
    let now = 1_000;
    const clock = jest.spyOn(Date, 'now').mockImplementation(() => now);
    try {
      let release: (rows: string[]) => void = () => undefined;
      const recent = new RecentReads(
        () => new Promise<string[]>((resolve) => (release = resolve)),
        100,
        [] as string[],
      );
      expect(recent.peek('a')).toBeUndefined();
      const read = recent.get('a');
      expect(recent.peek('a')).toBeUndefined();
      release(['rows']);
      await read;
      expect(recent.peek('a')).toEqual(['rows']);
      now += 100;
      expect(recent.peek('a')).toBeUndefined();
      now -= 1;
      recent.forget('a');
      expect(recent.peek('a')).toBeUndefined();
    } finally {
      clock.mockRestore();
    }
  });
});
