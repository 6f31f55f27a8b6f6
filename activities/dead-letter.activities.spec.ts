import { MockActivityEnvironment } from '@temporalio/testing';
import type { WebhookResult } from '@libs/delivery/webhook-sender';
import type { EventFrame } from '@libs/frame';
import type { ClaimedBatch, ReplayScope, SubscriptionEntity } from '@libs/storage';
import { REPLAY_BATCH_INTERRUPTED, type ReplayBatchInput } from '../contracts';
import { createDeadLetterActivities } from './dead-letter.activities';

interface Row {
  id: number;
  replayedAt?: number;
  replayId?: string;
  claimedUntil?: number;
  lastError: string;
  attempts: number;
}

/**
 * The dead_letters replay contract (dead-letter-replay-store.ts) in memory: a claim takes the dead letters after
 * `afterId` up to `upToId` that are free or this replay's own; the marks change only this replay's unreplayed
 * claims; counts are read back per replay and id range. (Only `filter: {}` and `ids` selections.)
 */
class FakeReplays {
  constructor(readonly rows: Row[]) {}
  async claim(scope: ReplayScope, afterId: string, limit: number, claimMs: number): Promise<ClaimedBatch> {
    const ids = 'ids' in scope.selection ? new Set(scope.selection.ids.map(Number)) : undefined;
    const candidates = this.rows
      .filter(
        (r) =>
          r.id > Number(afterId) &&
          r.id <= Number(scope.upToId) &&
          r.replayedAt === undefined &&
          (!ids || ids.has(r.id)),
      )
      .slice(0, limit);
    const now = Date.now();
    const claimed = candidates.filter(
      (r) => r.claimedUntil === undefined || r.claimedUntil < now || r.replayId === scope.replayId,
    );
    for (const r of claimed) Object.assign(r, { replayId: scope.replayId, claimedUntil: now + claimMs });
    return {
      letters: claimed.map((r) => ({
        id: String(r.id),
        topic: 't',
        partition: 0,
        offset: r.id * 10,
        attributes: { id: `e-${r.id}`, source: '/s', type: 't', specversion: '1.0' },
        data: null,
      })),
      heldElsewhere: candidates.length - claimed.length,
      lastId: candidates.length ? String(candidates[candidates.length - 1].id) : undefined,
    };
  }
  private own(replayId: string, id: string) {
    return this.rows.find((r) => r.id === Number(id) && r.replayId === replayId && r.replayedAt === undefined);
  }
  async markReplayed(replayId: string, id: string) {
    const row = this.own(replayId, id);
    if (!row) return { marked: false, rejected: 'NOT_CLAIMED' as const };
    Object.assign(row, { replayedAt: Date.now(), claimedUntil: undefined });
    return { marked: true };
  }
  async markFailed(replayId: string, id: string, error: string) {
    const row = this.own(replayId, id);
    if (!row) return { marked: false, rejected: 'NOT_CLAIMED' as const };
    Object.assign(row, { lastError: error, attempts: row.attempts + 1, claimedUntil: undefined });
    return { marked: true };
  }
  async release(replayId: string, ids: string[]) {
    let n = 0;
    for (const id of ids) {
      const row = this.own(replayId, id);
      if (row) Object.assign(row, { replayId: undefined, claimedUntil: undefined }, n++);
    }
    return n;
  }
  async countIn(replayId: string, afterId: string, lastId: string) {
    const range = this.rows.filter((r) => r.replayId === replayId && r.id > Number(afterId) && r.id <= Number(lastId));
    return {
      replayed: range.filter((r) => r.replayedAt !== undefined).length,
      failed: range.filter((r) => r.replayedAt === undefined && r.claimedUntil === undefined).length,
    };
  }
}

const letters = (n: number): Row[] =>
  Array.from({ length: n }, (_, i) => ({ id: i + 1, lastError: 'HTTP 500', attempts: 2 }));
const subscription = { id: 'sub-1', protocol: 'HTTP', sink: 'http://127.0.0.1:1/hook' } as SubscriptionEntity;
const input = (overrides: Partial<ReplayBatchInput> = {}): ReplayBatchInput => ({
  replayId: 'r1',
  subscriptionId: 'sub-1',
  selection: { filter: {} },
  upToId: '100',
  afterId: '0',
  limit: 10,
  ratePerSecond: 1000,
  ...overrides,
});

function setup(
  rows: Row[],
  answer: (frame: EventFrame, signal: AbortSignal) => Promise<WebhookResult> | WebhookResult = () => ({
    ok: true,
    status: 200,
  }),
) {
  const replays = new FakeReplays(rows);
  const sent: string[] = [];
  const shutdown = new AbortController();
  const activities = createDeadLetterActivities({
    replays,
    subscription: async (id) => (id === 'sub-1' ? subscription : undefined),
    sender: {
      send: async (_target, frame, _messageId, signal) => {
        sent.push(frame.id);
        return answer(frame, signal ?? new AbortController().signal);
      },
    },
    purgeExpired: async () => 0,
    deliveryTimeoutMs: 1000,
    shutdownSignal: shutdown.signal,
  });
  return { replays, sent, shutdown, activities };
}

describe('replayDeadLetters activity', () => {
  it('sends the batch in id order, marks each delivered letter, and counts from what it marked', async () => {
    const { activities, sent, replays } = setup(letters(4));
    const result = await new MockActivityEnvironment().run(activities.replayDeadLetters, input({ limit: 3 }));
    expect(sent).toEqual(['e-1', 'e-2', 'e-3']);
    expect(result).toEqual({ lastId: '3', done: false, replayed: 3, failed: 0, heldElsewhere: 0 });
    expect(replays.rows.map((r) => r.replayedAt !== undefined)).toEqual([true, true, true, false]);
  });

  it('keeps a letter the sink refuses as a dead letter with the new error, counted failed', async () => {
    const { activities, replays } = setup(letters(2), (frame) =>
      frame.id === 'e-2' ? { ok: false, status: 503, error: 'HTTP 503' } : { ok: true },
    );
    const result = await new MockActivityEnvironment().run(activities.replayDeadLetters, input());
    expect(result).toMatchObject({ replayed: 1, failed: 1, lastId: '2' });
    expect(replays.rows[1]).toMatchObject({ lastError: 'HTTP 503', attempts: 3, replayId: 'r1' });
    expect([replays.rows[1].replayedAt, replays.rows[1].claimedUntil]).toEqual([undefined, undefined]);
  });

  it('paces its deliveries at the replay rate', async () => {
    const { activities, sent } = setup(letters(5));
    const started = Date.now();
    await new MockActivityEnvironment().run(activities.replayDeadLetters, input({ ratePerSecond: 20 }));
    expect(sent).toHaveLength(5);
    // Four gaps of 50 ms between five deliveries.
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
  });

  it('heartbeats while one slow delivery is out, so Temporal never takes the batch for dead', async () => {
    // On a fake clock: how many beats fit in the delivery's 400 ms is then the activity's schedule (one every third
    // of the heartbeat timeout), not how late a busy machine runs its timers.
    jest.useFakeTimers();
    try {
      const { activities } = setup(
        letters(1),
        () => new Promise((resolve) => setTimeout(() => resolve({ ok: true }), 400)),
      );
      const env = new MockActivityEnvironment({ heartbeatTimeoutMs: 300 });
      const beats: unknown[] = [];
      env.on('heartbeat', (d: unknown) => beats.push(d));
      let settled = false;
      const run = env.run(activities.replayDeadLetters, input()).finally(() => (settled = true));
      while (!settled) await jest.advanceTimersByTimeAsync(50);
      await run;
      // Before the delivery came back (the only per-letter heartbeat is the last one).
      expect(beats.length).toBeGreaterThanOrEqual(3);
      expect(beats[0]).toEqual({ lastId: undefined });
      expect(beats[beats.length - 1]).toEqual({ lastId: '1' });
    } finally {
      jest.useRealTimers();
    }
  });

  it('resumes a retried attempt after the last letter its heartbeat names, sending nothing twice', async () => {
    const rows = letters(4);
    // The first attempt claimed 1-4, delivered and marked 1 and 2, and died.
    for (const r of rows) Object.assign(r, { replayId: 'r1', claimedUntil: Date.now() + 60_000 });
    Object.assign(rows[0], { replayedAt: 1, claimedUntil: undefined });
    Object.assign(rows[1], { replayedAt: 2, claimedUntil: undefined });
    const { activities, sent } = setup(rows);
    const result = await new MockActivityEnvironment({ attempt: 2, heartbeatDetails: { lastId: '2' } }).run(
      activities.replayDeadLetters,
      input(),
    );
    expect(sent).toEqual(['e-3', 'e-4']);
    expect(result).toEqual({ lastId: '4', done: false, replayed: 4, failed: 0, heldElsewhere: 0 });
  });

  it('passes over letters another replay holds, and says the replay is done when nothing is left', async () => {
    const rows = letters(2);
    Object.assign(rows[0], { replayId: 'other', claimedUntil: Date.now() + 60_000 });
    const { activities, sent } = setup(rows);
    expect(await new MockActivityEnvironment().run(activities.replayDeadLetters, input())).toMatchObject({
      heldElsewhere: 1,
      replayed: 1,
      lastId: '2',
    });
    expect(sent).toEqual(['e-2']);
    expect(await new MockActivityEnvironment().run(activities.replayDeadLetters, input({ afterId: '2' }))).toEqual({
      done: true,
      replayed: 0,
      failed: 0,
      heldElsewhere: 0,
    });
  });

  it('cancelled (from the Temporal UI) with a letter in flight: that send is not aborted, its answer is marked, the unsent letters go', async () => {
    const env = new MockActivityEnvironment();
    // The sink may have the letter in flight already: aborting its request would leave a delivered letter unmarked.
    const { activities, replays, sent } = setup(letters(3), async (_frame, signal) => {
      env.cancel();
      await new Promise((resolve) => setImmediate(resolve));
      return signal.aborted ? { ok: false, error: 'aborted' } : { ok: true, status: 200 };
    });
    await expect(env.run(activities.replayDeadLetters, input({ ratePerSecond: 10 }))).rejects.toMatchObject({
      name: 'CancelledFailure',
    });
    expect(sent).toEqual(['e-1']);
    expect(replays.rows.map((r) => [r.replayedAt !== undefined, r.replayId ?? null])).toEqual([
      [true, 'r1'],
      [false, null],
      [false, null],
    ]);
  });

  it('on shutdown lets the unsent letters go and fails retryably, to resume elsewhere', async () => {
    const { activities, shutdown, replays } = setup(letters(3), () => {
      shutdown.abort();
      return { ok: true };
    });
    await expect(
      new MockActivityEnvironment().run(activities.replayDeadLetters, input({ ratePerSecond: 10 })),
    ).rejects.toMatchObject({
      type: REPLAY_BATCH_INTERRUPTED,
      nonRetryable: false,
    });
    expect(replays.rows.map((r) => [r.replayedAt !== undefined, r.replayId ?? null])).toEqual([
      [true, 'r1'],
      [false, null],
      [false, null],
    ]);
  });
});
