import type { BatchHandler, BatchItem, BatchOutcome, EventMeshClient } from '@eventmesh/client';
import { StaleEpochError, type WriteFence } from '@libs/fence';
import type { Logger } from '@libs/logging';
import type { PutOutcome, SinkConnector } from '../spi';
import type { JobRunStore, NewDeadLetter } from '../store/job-run-store';
import type { JobStore } from '../store/job-store';
import type { RunContext } from './run-context';
import { runSink } from './sink-loop';

/**
 * The sink loop's answers and commits, against a fake subscription whose batch handler the test calls (as the SDK
 * does: one batch at a time) and a sink whose outcomes the test sets: a delivery is acked only after its batch's
 * counts were committed under the fence, a fenced-out run writes nothing more, and a commit that fails for a moment
 * loses no count.
 */
describe('runSink: answers after the fenced commit', () => {
  let handler: BatchHandler | undefined;
  let puts: string[][];
  let commits: { moved: number; deadLetters: NewDeadLetter[] }[];
  let commitFailures: Error[];
  /** Set: another run claimed the job, and every commit of this one is refused. */
  let fenced: boolean;
  let lastErrors: (string | null)[];
  let outcomesOf: (ids: string[]) => PutOutcome[] | Promise<PutOutcome[]>;
  let closed: string | undefined;
  let stop: AbortController;
  let ctx: RunContext;
  let running: Promise<void>;

  const itemsOf = (...ids: string[]): BatchItem[] =>
    ids.map((id) => ({
      deliveryId: `d-${id}`,
      transport: 'websocket',
      event: { id, source: '/s', type: 'x', toJSON: () => ({ id, source: '/s' }) } as unknown as BatchItem['event'],
    }));

  const start = () => {
    const consumer = {
      on: () => consumer,
      close: () => Promise.resolve(void (closed ??= 'close')),
      drain: () => Promise.resolve(void (closed ??= 'drain')),
    };
    const mesh = {
      subscriptions: { get: () => Promise.resolve({ config: {} }) },
      consumeBatches: (_id: string, h: BatchHandler) => {
        handler = h;
        return consumer;
      },
    } as unknown as EventMeshClient;
    const sink: SinkConnector = {
      exactlyOnce: 'test',
      put: (events) => {
        const ids = events.map((e) => e.id);
        puts.push(ids);
        return Promise.resolve(outcomesOf(ids));
      },
      close: () => Promise.resolve(),
    };
    const runs = {
      commit: (_fence: WriteFence, _job: string, round: { moved: number; deadLetters: NewDeadLetter[] }) => {
        if (fenced) return Promise.reject(new StaleEpochError({ kind: 'connector-job', jobId: 'job' }, 1, 2));
        const failure = commitFailures.shift();
        if (failure) return Promise.reject(failure);
        commits.push(round);
        return Promise.resolve({ deadLettered: round.deadLetters.length });
      },
    } as unknown as JobRunStore;
    const jobs = {
      setLastError: (_id: string, e: string | null) => Promise.resolve(void lastErrors.push(e)),
    } as unknown as JobStore;
    const log = { warn: () => undefined, info: () => undefined } as unknown as Logger;
    ctx = {
      jobId: 'job',
      fence: {} as WriteFence,
      runs,
      jobs,
      mesh,
      log,
      signal: stop.signal,
      fencedOff: new AbortController().signal,
      progress: { epoch: 1, moved: 0, deadLettered: 0 },
    };
    running = runSink(sink, 'sub', ctx);
    // The loop is running once the SDK has its handler (after the subscription's config was read).
    return new Promise<void>((resolve) => {
      const check = () => (handler ? resolve() : setTimeout(check, 1));
      check();
    });
  };

  const call = (items: BatchItem[]) => Promise.resolve(handler!(items)) as Promise<BatchOutcome[]>;

  beforeEach(() => {
    handler = undefined;
    puts = [];
    commits = [];
    commitFailures = [];
    fenced = false;
    lastErrors = [];
    outcomesOf = (ids) => ids.map(() => ({ ok: true, written: true }));
    closed = undefined;
    stop = new AbortController();
  });
  afterEach(async () => {
    stop.abort();
    await running.catch(() => undefined);
  });

  it('answers a batch of mixed outcomes each as the sink said, after committing its counts and dead letters', async () => {
    await start();
    outcomesOf = () => [
      { ok: true, written: true },
      { ok: true, written: false },
      { ok: false, permanent: true, reason: 'bad row' },
      { ok: false, permanent: false, reason: 'target busy' },
    ];
    expect(await call(itemsOf('1', '2', '3', '4'))).toEqual(['ack', 'ack', { reject: 'bad row' }, { nack: true }]);
    expect(commits).toEqual([
      { moved: 1, deadLetters: [{ reason: 'bad row', record: { id: '3', source: '/s' }, key: '["/s","3"]' }] },
    ]);
    expect(ctx.progress).toMatchObject({ moved: 1, deadLettered: 1, lastError: 'target busy' });
  });

  it('writes nothing more to the target once a commit was refused by the fence, and gives the deliveries back at once', async () => {
    await start();
    fenced = true;
    await expect(call(itemsOf('1'))).rejects.toBeInstanceOf(StaleEpochError);
    const refusedAt = Date.now();
    // The SDK starts the next batch when the refused one was answered (nacked): this run holds the job no more.
    await expect(call(itemsOf('2'))).rejects.toBeInstanceOf(StaleEpochError);
    expect(puts).toEqual([['1']]);
    await expect(running).rejects.toBeInstanceOf(StaleEpochError);
    expect(closed).toBe('close');
    expect(Date.now() - refusedAt).toBeLessThan(500);
  });

  it('tries a commit that failed for a moment again before answering: the rows written are counted once, and acked', async () => {
    await start();
    commitFailures.push(new Error('Connection terminated unexpectedly'));
    expect(await call(itemsOf('1', '2'))).toEqual(['ack', 'ack']);
    expect(puts).toEqual([['1', '2']]);
    expect(commits).toEqual([{ moved: 2, deadLetters: [] }]);
    expect(ctx.progress.moved).toBe(2);
  });

  it("records a put that throws as the job's last error, and nacks the batch", async () => {
    await start();
    outcomesOf = () => Promise.reject(new Error('target unreachable'));
    await expect(call(itemsOf('1'))).rejects.toThrow('target unreachable');
    expect(commits).toEqual([]);
    expect(lastErrors).toContain('target unreachable');
    expect(ctx.progress.lastError).toBe('target unreachable');
  });
});
