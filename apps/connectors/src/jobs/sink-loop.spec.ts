import { EventEmitter } from 'node:events';
import type { BatchItem, BatchOutcome, EventMeshClient } from '@eventmesh/client';
import { StaleEpochError, type WriteFence } from '@libs/fence';
import type { Logger } from '@libs/logging';
import type { PutOutcome, SinkConnector } from '../spi';
import type { JobRunStore } from '../store/job-run-store';
import type { JobStore } from '../store/job-store';
import type { RunContext } from './run-context';
import { runSink } from './sink-loop';

/** A fenced commit of the job store the test answers: what it carried, and how it ends. */
interface Commit {
  moved: number;
  letters: number;
  resolve: () => void;
  reject: (e: Error) => void;
}

/**
 * The sink loop's answers and its fenced commits, against a sink whose outcomes the test sets and a job store whose
 * commits the test answers: a written batch is answered without waiting for its count's commit (the target's
 * ledger, not the job store, keeps the writes exactly once), counts added meanwhile go in the next commit, a batch
 * with a dead letter is answered only after its letter is committed, and a count commit refused by the fence ends
 * the run with that refusal.
 */
describe('runSink: answers, counts and letters', () => {
  let commits: Commit[];
  let outcomes: PutOutcome[][];
  let handler: (batch: BatchItem[]) => Promise<BatchOutcome[]>;
  let consumer: EventEmitter & { closed?: boolean; drained?: boolean };
  let stop: AbortController;
  let running: Promise<void>;
  let ctx: RunContext;

  const start = () => {
    const sink: SinkConnector = {
      exactlyOnce: 'test',
      put: () => Promise.resolve(outcomes.shift()!),
      close: () => Promise.resolve(),
    };
    consumer = Object.assign(new EventEmitter(), {
      close: () => Promise.resolve(void (consumer.closed = true)),
      drain: () => Promise.resolve(void (consumer.drained = true)),
    });
    const mesh = {
      subscriptions: { get: () => Promise.resolve({ config: {} }) },
      consumeBatches: (_id: string, h: typeof handler) => ((handler = h), consumer),
    } as unknown as EventMeshClient;
    const runs = {
      commit: (_fence: WriteFence, _job: string, round: { moved: number; deadLetters: unknown[] }) =>
        new Promise((resolve, reject) =>
          commits.push({
            moved: round.moved,
            letters: round.deadLetters.length,
            resolve: () => resolve({ deadLettered: round.deadLetters.length }),
            reject,
          }),
        ),
    } as unknown as JobRunStore;
    ctx = {
      jobId: 'job',
      fence: {} as WriteFence,
      runs,
      jobs: { setLastError: () => Promise.resolve() } as unknown as JobStore,
      mesh,
      log: { warn: () => undefined, info: () => undefined } as unknown as Logger,
      signal: stop.signal,
      fencedOff: new AbortController().signal,
      progress: { epoch: 1, moved: 0, deadLettered: 0 },
    };
    running = runSink(sink, 'sub', ctx);
  };

  const batch = (...ids: string[]) =>
    ids.map((id) => ({ event: { id, source: '/s', toJSON: () => ({ id, source: '/s' }) } })) as unknown as BatchItem[];
  /** Lets every promise callback queued run (the fakes answer at once or when the test says). */
  const settle = () => new Promise((r) => setImmediate(r));
  const written: PutOutcome = { ok: true, written: true };

  beforeEach(async () => {
    commits = [];
    outcomes = [];
    stop = new AbortController();
    start();
    await settle();
  });

  afterEach(async () => {
    stop.abort();
    commits.forEach((c) => c.resolve());
    await running.catch(() => undefined);
  });

  it('answers a written batch before its count is committed; counts added meanwhile go in the next commit', async () => {
    outcomes.push([written, written], [written, { ok: true, written: false }, written]);
    await expect(handler(batch('a', 'b'))).resolves.toEqual(['ack', 'ack']);
    expect(commits.map((c) => c.moved)).toEqual([2]);
    // The first count's commit still open: the next batch is written and answered, its count waits.
    await expect(handler(batch('c', 'd', 'e'))).resolves.toEqual(['ack', 'ack', 'ack']);
    expect(commits.map((c) => c.moved)).toEqual([2]);
    commits[0].resolve();
    await settle();
    expect(commits.map((c) => c.moved)).toEqual([2, 2]);
    commits[1].resolve();
    await settle();
    expect(commits).toHaveLength(2);
    expect(ctx.progress.moved).toBe(4);
  });

  it('answers a batch with a dead letter only once the letter is committed', async () => {
    outcomes.push([written, { ok: false, permanent: true, reason: 'no such column' }]);
    let answers: BatchOutcome[] | undefined;
    void handler(batch('a', 'b')).then((a) => (answers = a));
    await settle();
    expect(commits.map((c) => [c.moved, c.letters])).toEqual([[1, 1]]);
    expect(answers).toBeUndefined();
    commits[0].resolve();
    await settle();
    expect(answers).toEqual(['ack', { reject: 'no such column' }]);
    expect(ctx.progress.deadLettered).toBe(1);
  });

  it('a count commit refused by the fence ends the run with the refusal, its deliveries given back (closed, not drained)', async () => {
    outcomes.push([written]);
    await handler(batch('a'));
    const refusal = new StaleEpochError({ kind: 'connector-job', jobId: 'job' }, 1, 2);
    commits[0].reject(refusal);
    await expect(running).rejects.toBe(refusal);
    expect(consumer.closed).toBe(true);
    expect(consumer.drained).toBeUndefined();
  });

  it('a count commit that fails otherwise keeps its count for the next commit', async () => {
    outcomes.push([written, written], [written]);
    await handler(batch('a', 'b'));
    commits[0].reject(new Error('connection terminated'));
    await settle();
    await handler(batch('c'));
    expect(commits.map((c) => c.moved)).toEqual([2, 3]);
  });
});
