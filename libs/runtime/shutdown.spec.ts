const logged: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
jest.mock('@libs/logging', () => ({
  createLogger: () => ({
    error: (fields: Record<string, unknown>, msg: string) => logged.push({ level: 'error', fields, msg }),
    warn: (fields: Record<string, unknown>, msg: string) => logged.push({ level: 'warn', fields, msg }),
  }),
}));

import { shutdownInOrder } from './shutdown';

describe('shutdownInOrder', () => {
  beforeEach(() => (logged.length = 0));
  afterEach(() => jest.useRealTimers());

  it('runs every step in order, past one that fails, and logs the failure by name', async () => {
    const ran: string[] = [];
    await shutdownInOrder('instance', [
      ['a', () => void ran.push('a')],
      [
        'b',
        async () => {
          ran.push('b');
          throw new Error('refused');
        },
      ],
      ['c', async () => void ran.push('c')],
    ]);
    expect(ran).toEqual(['a', 'b', 'c']);
    expect(logged).toEqual([
      { level: 'warn', fields: { scope: 'instance', step: 'b', error: 'refused' }, msg: 'shutdown step failed' },
    ]);
  });

  it('names a step still running after slowMs, every slowMs, and stops once it ends', async () => {
    jest.useFakeTimers();
    let finish!: () => void;
    const done = shutdownInOrder(
      'worker',
      [['Temporal worker of task queue q', () => new Promise<void>((r) => (finish = r))]],
      1000,
    );
    await jest.advanceTimersByTimeAsync(999);
    expect(logged).toEqual([]);
    await jest.advanceTimersByTimeAsync(2001);
    expect(logged.map((l) => [l.level, l.fields.step, l.fields.runningMs, l.msg])).toEqual([
      ['error', 'Temporal worker of task queue q', 1000, 'shutdown step still running'],
      ['error', 'Temporal worker of task queue q', 2000, 'shutdown step still running'],
      ['error', 'Temporal worker of task queue q', 3000, 'shutdown step still running'],
    ]);
    finish();
    await done;
    await jest.advanceTimersByTimeAsync(5000);
    expect(logged).toHaveLength(3);
  });
});
