import type { DataSource } from 'typeorm';
import { JobRunStore } from '../../apps/connectors/src/store/job-run-store';
import { deadLetterKeyOf } from '../../apps/connectors/src/jobs/sink-loop';
import { AlreadyReplayedError, DeadLetterGoneError, JobStore } from '../../apps/connectors/src/store/job-store';
import { migrateConnectorsSchema } from '../../apps/connectors/src/store/migrations';
import { StaleEpochError } from '@libs/fence';
import { createDataSource } from '@libs/storage';
import { testConfig } from '../support/env';
import { waitFor } from '../support/wait-for';

/**
 * The connector runtime's own schema and the fence of a job's runs (real Postgres): a run's position write after
 * another run claimed the job is refused and counted, and changes nothing; an operator's position reset fences
 * the run in flight the same way.
 */
describe('JobRunStore: the fenced position of a connector job', () => {
  let db: DataSource;
  let jobs: JobStore;
  let runs: JobRunStore;

  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'connector-job-fence-spec');
    await db.initialize();
    await migrateConnectorsSchema(db);
    expect(await migrateConnectorsSchema(db)).toEqual([]);
    jobs = new JobStore(db);
    runs = new JobRunStore(db);
  });
  afterAll(() => db.destroy());

  const newJob = async () =>
    (await jobs.create('t1', `job-${Date.now()}-${Math.random()}`.slice(0, 40), 'postgres-outbox', {}))!.id;
  const view = async (id: string) => (await jobs.get('t1', id))!;

  it('refuses the position write of a run another run took the job from, and keeps the newer position', async () => {
    const id = await newJob();
    const old = await runs.claim(id, 'replica-a');
    await runs.commit(runs.fenceFor(id, old), id, { position: '10:1', moved: 1, deadLetters: [] });
    const next = await runs.claim(id, 'replica-b');
    expect(next).toBe(old + 1);
    await runs.commit(runs.fenceFor(id, next), id, { position: '20:1', moved: 1, deadLetters: [] });
    await expect(
      runs.commit(runs.fenceFor(id, old), id, {
        position: '15:1',
        moved: 5,
        deadLetters: [{ reason: 'x', record: {} }],
      }),
    ).rejects.toBeInstanceOf(StaleEpochError);
    expect(await runs.renew(id, old)).toBe(false);
    const after = await view(id);
    expect(after).toMatchObject({
      position: '20:1',
      moved: 2,
      deadLettered: 0,
      epoch: next,
      owner: 'replica-b',
      rejectedWrites: 2,
    });
    expect(await jobs.deadLetters(id, undefined, 10)).toEqual([]);
  });

  it('records a refused record once while its letter waits (refused again: nothing added, nothing counted); once replayed, a new refusal is recorded', async () => {
    const id = await newJob();
    const fence = runs.fenceFor(id, await runs.claim(id, 'replica-a'));
    const event = { specversion: '1.0', id: 'e-7', source: '/orders', type: 'order.created', data: { amount: 'x' } };
    const letter = { reason: 'invalid input syntax for type integer', record: event, key: deadLetterKeyOf(event) };
    expect(await runs.commit(fence, id, { moved: 3, deadLetters: [letter] })).toEqual({ deadLettered: 1 });
    // The same event refused again (its batch split down to it; its record may differ, a time set anew), beside
    // another, and a letter without a key (a source's), which is always recorded.
    const again = {
      reason: 'again',
      record: { ...event, time: new Date().toISOString() },
      key: deadLetterKeyOf(event),
    };
    const other = {
      reason: 'too long',
      record: { ...event, id: 'e-8' },
      key: deadLetterKeyOf({ ...event, id: 'e-8' }),
    };
    const keyless = { reason: 'no type', record: { id: 99 } };
    expect(await runs.commit(fence, id, { moved: 0, deadLetters: [again, other, keyless, keyless] })).toEqual({
      deadLettered: 3,
    });
    const letters = await jobs.deadLetters(id, undefined, 10);
    expect(letters.map((l) => String((l.record as { id: string | number }).id)).sort()).toEqual([
      '99',
      '99',
      'e-7',
      'e-8',
    ]);
    expect(await view(id)).toMatchObject({ deadLettered: 4, moved: 3, movedLastMinute: 3 });
    const first = letters.find((l) => (l.record as { id: string }).id === 'e-7')!;
    expect(await jobs.replay(id, first.id, async () => undefined)).toBeUndefined();
    expect(await runs.commit(fence, id, { moved: 0, deadLetters: [letter] })).toEqual({ deadLettered: 1 });
    expect(await jobs.deadLetters(id, undefined, 10)).toHaveLength(5);
  });

  it('two replays of one letter at once: the second waits for the first and is refused as replayed already; the record goes once', async () => {
    const id = await newJob();
    const fence = runs.fenceFor(id, await runs.claim(id, 'replica-a'));
    const event = { specversion: '1.0', id: 'e-7', source: '/orders', type: 'order.created', data: { amount: 'x' } };
    await runs.commit(fence, id, {
      moved: 0,
      deadLetters: [{ reason: 'refused', record: event, key: deadLetterKeyOf(event) }],
    });
    const [letter] = await jobs.deadLetters(id, undefined, 10);
    let replays = 0;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const first = jobs.replay(id, letter.id, async () => {
      replays++;
      await held;
      return undefined;
    });
    await waitFor('the first replay to run', async () => replays === 1);
    const second = jobs.replay(id, letter.id, async () => {
      replays++;
      return undefined;
    });
    // The second waits on the first's mark (Postgres shows it waiting on a lock) before anything is decided.
    await waitFor('the second replay to wait on the first', async () => {
      const waiting: { n: number }[] = await db.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%replayed_at IS NULL%'`,
      );
      return waiting[0].n > 0;
    });
    release();
    await expect(first).resolves.toBeUndefined();
    await expect(second).rejects.toBeInstanceOf(AlreadyReplayedError);
    await expect(second).rejects.toMatchObject({ replayedAt: expect.any(Date) });
    expect(replays).toBe(1);
    // Replayed: a later replay is refused too, without running.
    await expect(jobs.replay(id, letter.id, async () => void replays++)).rejects.toBeInstanceOf(AlreadyReplayedError);
    expect(replays).toBe(1);
    // A letter that is not there (its job deleted meanwhile): gone, not replayed already.
    await expect(jobs.replay(id, '999999999', async () => void replays++)).rejects.toBeInstanceOf(DeadLetterGoneError);
    expect(replays).toBe(1);
  });

  it('a replay refused again leaves its letter waiting; a refusal recorded while a replay runs is a letter of its own', async () => {
    const id = await newJob();
    const fence = runs.fenceFor(id, await runs.claim(id, 'replica-a'));
    const event = { specversion: '1.0', id: 'e-9', source: '/orders', type: 'order.created', data: { amount: 'x' } };
    const letter = { reason: 'refused', record: event, key: deadLetterKeyOf(event) };
    await runs.commit(fence, id, { moved: 0, deadLetters: [letter] });
    const [first] = await jobs.deadLetters(id, undefined, 10);
    expect(await jobs.replay(id, first.id, async () => 'still refused')).toBe('still refused');
    await expect(jobs.replay(id, first.id, () => Promise.reject(new Error('target down')))).rejects.toThrow(
      'target down',
    );
    expect(await jobs.deadLetters(id, undefined, 10)).toEqual([
      expect.objectContaining({ id: first.id, replayedAt: null }),
    ]);
    // The job refuses the event again while the operator's replay runs: its letter is recorded once the replay
    // is, and counted.
    let during: Promise<{ deadLettered: number }> | undefined;
    await jobs.replay(id, first.id, async () => {
      during = runs.commit(fence, id, { moved: 0, deadLetters: [{ ...letter, reason: 'refused during the replay' }] });
      // The refusal waits for the replay's mark (Postgres shows it waiting on a lock), so it is not decided before it.
      await waitFor('the refusal to wait on the replay', async () => {
        const waiting: { n: string }[] = await db.query(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO connectors.dead_letters%'`,
        );
        return Number(waiting[0].n) > 0;
      });
      return undefined;
    });
    expect(await during).toEqual({ deadLettered: 1 });
    const letters = await jobs.deadLetters(id, undefined, 10);
    expect(letters.map((l) => [l.reason, l.replayedAt === null])).toEqual([
      ['refused', false],
      ['refused during the replay', true],
    ]);
  });

  it('a position reset takes the next epoch: the running loop cannot write over it', async () => {
    const id = await newJob();
    const epoch = await runs.claim(id, 'replica-a');
    await runs.commit(runs.fenceFor(id, epoch), id, { position: '30:2', moved: 3, deadLetters: [] });
    await runs.resetPosition(id, null);
    await expect(
      runs.commit(runs.fenceFor(id, epoch), id, { position: '31:1', moved: 1, deadLetters: [] }),
    ).rejects.toBeInstanceOf(StaleEpochError);
    expect(await runs.position(id)).toBeUndefined();
    expect((await view(id)).epoch).toBe(epoch + 1);
  });

  it('another tenant does not see the job', async () => {
    const id = await newJob();
    expect(await jobs.get('t2', id)).toBeUndefined();
    expect(await jobs.delete('t2', id)).toBe(false);
    expect((await jobs.list('t2')).map((j) => j.id)).not.toContain(id);
  });
});
