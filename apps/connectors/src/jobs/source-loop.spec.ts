import type { EventMeshClient } from '@eventmesh/client';
import type { WriteFence } from '@libs/fence';
import type { Logger } from '@libs/logging';
import type { SourceConnector, SourceRecord } from '../spi';
import type { JobRunStore } from '../store/job-run-store';
import type { JobStore } from '../store/job-store';
import { laneOf, PUBLISH_LANES } from './publish-lanes';
import type { RunContext } from './run-context';
import { runSource } from './source-loop';

/** A publish request the fake runtime holds until the test answers it. */
interface Request {
  ids: string[];
  ack: () => void;
  fail: (e: Error) => void;
}

/**
 * The source loop's pipelining, against a source of numbered records (position n: after record n) and a runtime
 * whose publishes the test acknowledges one by one: polls are published while earlier ones are unacknowledged, the
 * committed position never passes an unacknowledged record, one key's requests are one at a time, and a failed
 * publish sends the job back to its committed position.
 */
describe('runSource: pipelined polls, the position behind the acknowledged', () => {
  let requests: Request[];
  let commits: { position?: string; moved: number }[];
  /** The position in the store, and dead letters it holds. */
  let stored: { position?: string; deadLetters: number };
  /** Set: the next commit is written, but its answer is lost (the connection dropped after COMMIT). */
  let loseCommitAnswer: boolean;
  let polls: (string | undefined)[];
  let stop: AbortController;
  let running: Promise<void>;

  /** Records 1..keys.length, record n with partition key keys[n - 1]. */
  const start = (keys: string[], batchSize: number) => {
    const records: SourceRecord[] = keys.map((key, i) =>
      key === 'invalid'
        ? { ok: false, reason: 'no id', raw: { n: i + 1 } }
        : { ok: true, topic: 't', event: { id: String(i + 1), source: '/s', type: 'x', partitionkey: key } },
    );
    const source: SourceConnector = {
      exactlyOnce: 'test',
      poll: (position, max) => {
        polls.push(position);
        const from = Number(position ?? 0);
        const read = records.slice(from, from + max);
        return Promise.resolve(read.length ? { records: read, position: String(from + read.length) } : { records: [] });
      },
      close: () => Promise.resolve(),
    };
    const held = (events: Iterable<{ id?: string }>) =>
      new Promise<unknown>((resolve, reject) => {
        requests.push({ ids: [...events].map((e) => e.id!), ack: () => resolve([]), fail: reject });
        if (stop.signal.aborted) resolve([]);
      });
    const mesh = { publishMany: held, publish: (e: { id?: string }) => held([e]) } as unknown as EventMeshClient;
    const runs = {
      position: () => Promise.resolve(stored.position),
      commit: (_fence: WriteFence, _job: string, round: { position?: string; moved: number; deadLetters: [] }) => {
        commits.push({ position: round.position, moved: round.moved });
        stored.position = round.position ?? stored.position;
        stored.deadLetters += round.deadLetters.length;
        if (loseCommitAnswer) {
          loseCommitAnswer = false;
          return Promise.reject(new Error('Connection terminated unexpectedly'));
        }
        return Promise.resolve({ deadLettered: round.deadLetters.length });
      },
    } as unknown as JobRunStore;
    const jobs = { setLastError: () => Promise.resolve() } as unknown as JobStore;
    const log = { warn: () => undefined, info: () => undefined } as unknown as Logger;
    const ctx: RunContext = {
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
    running = runSource(source, batchSize, ctx);
  };

  /** Waits until `holds` (the loop runs on promises and short timers: a deadline far above that means it hung). */
  const until = async (what: string, holds: () => boolean) => {
    const deadline = Date.now() + 10000;
    while (!holds()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 1));
    }
  };
  /** Lets every promise callback queued run (the fakes answer at once: no I/O is waited on). */
  const settle = () => new Promise((r) => setImmediate(r));
  const requestOf = (id: string) => requests.find((r) => r.ids.includes(id))!;
  /** Keys of `count` distinct lanes, one per lane. */
  const keysInDistinctLanes = (count: number) => {
    if (count > PUBLISH_LANES) throw new Error(`only ${PUBLISH_LANES} lanes`);
    const byLane = new Map<number, string>();
    for (let i = 0; byLane.size < count; i++)
      if (!byLane.has(laneOf(`k${i}`, PUBLISH_LANES))) byLane.set(laneOf(`k${i}`, PUBLISH_LANES), `k${i}`);
    return [...byLane.values()];
  };

  beforeEach(() => {
    requests = [];
    commits = [];
    stored = { deadLetters: 0 };
    loseCommitAnswer = false;
    polls = [];
    stop = new AbortController();
  });
  afterEach(async () => {
    // The run drains what it read ahead: every request from now on is acknowledged at once.
    stop.abort();
    for (const r of requests) r.ack();
    await running;
  });

  it('publishes later polls while the first is unacknowledged, and commits no position past it', async () => {
    const [a, b] = keysInDistinctLanes(2);
    start([a, a, b, b], 2);
    await until('two polls in flight', () => requests.length === 2);
    expect(requests.map((r) => r.ids)).toEqual([
      ['1', '2'],
      ['3', '4'],
    ]);
    requestOf('3').ack();
    // Poll 2 acknowledged, poll 1 not: once every callback of that answer ran, nothing is committed.
    await settle();
    expect(commits).toEqual([]);
    requestOf('1').ack();
    await until('a commit', () => commits.length > 0);
    expect(commits).toEqual([{ position: '4', moved: 4 }]);
  });

  it("sends one key's records one request at a time, in order; what queued meanwhile goes in the next one", async () => {
    start(['k', 'k', 'k', 'k', 'k', 'k'], 2);
    await until('three polls read', () => polls.length >= 3);
    expect(requests.map((r) => r.ids)).toEqual([['1', '2']]);
    requests[0].ack();
    await until('the second request', () => requests.length === 2);
    expect(requests[1].ids).toEqual(['3', '4', '5', '6']);
    requests[1].ack();
    await until('the last commit', () => commits.at(-1)?.position === '6');
    expect(commits.reduce((n, c) => n + c.moved, 0)).toBe(6);
  });

  it('sends nothing more of a key after its failed request: the next round starts again from the committed position', async () => {
    start(['k', 'k', 'k', 'k', 'k', 'k'], 2);
    await until('three polls read', () => polls.length >= 3);
    requests[0].fail(new Error('runtime unreachable'));
    await settle();
    expect(requests).toHaveLength(1);
    await until('the next round', () => requests.length === 2);
    expect(requests[1].ids).toEqual(['1', '2']);
  });

  it('after a failed publish, commits only what was acknowledged before it and reads again from there', async () => {
    const [a, b] = keysInDistinctLanes(2);
    start([a, a, b, b], 2);
    await until('two polls in flight', () => requests.length === 2);
    requestOf('1').ack();
    await until('poll 1 committed', () => commits.length === 1);
    requestOf('3').fail(new Error('runtime unreachable'));
    await until('poll 2 published again', () => requests.filter((r) => r.ids.includes('3')).length === 2);
    expect(commits).toEqual([{ position: '2', moved: 2 }]);
    expect(polls.filter((p) => p === '2')).toHaveLength(2);
    requests.at(-1)!.ack();
    await until('the commit after it', () => commits.length === 2);
    expect(commits[1]).toEqual({ position: '4', moved: 2 });
  });

  it('reads again from the stored position after a commit whose answer was lost: nothing is counted or dead-lettered twice', async () => {
    loseCommitAnswer = true;
    start(['k', 'invalid', 'k', 'k'], 2);
    await until('the first request', () => requests.length === 1);
    requests[0].ack();
    // Poll 1 (records 1-2) is committed, its answer lost: the round fails once poll 2's request was answered.
    await until("poll 2's request", () => requests.length === 2);
    requests[1].ack();
    await until('the next round, done', () => {
      for (const r of requests) r.ack();
      return stored.position === '4' && polls.at(-1) === '4';
    });
    expect(requests.map((r) => r.ids)).toEqual([['1'], ['3', '4'], ['3', '4']]);
    expect(stored.deadLetters).toBe(1);
    expect(commits.reduce((n, c) => n + c.moved, 0)).toBe(3);
  });
});
