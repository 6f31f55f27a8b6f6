import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { A2ATaskStore, StoredTask } from '@libs/a2a';
import { createDataSource } from '@libs/storage';
import { testConfig } from '../support/env';

/** The A2A task store's guarantees on real Postgres: compare-and-set state changes, legal transitions only, tenancy. */
describe('A2ATaskStore (real Postgres)', () => {
  let db: DataSource;
  let store: A2ATaskStore;
  const tenant = `tasks-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'a2a-task-store-spec');
    await db.initialize();
    store = new A2ATaskStore(db);
  });
  afterAll(() => db.destroy());

  const created = (agent = 'echo'): Promise<StoredTask> =>
    store.create({
      id: randomUUID(),
      tenant,
      agent,
      contextId: 'ctx',
      history: [{ messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'hi' }] }],
      metadata: {},
    });

  it('creates a submitted task at version 0, readable only by its tenant', async () => {
    const task = await created();
    expect(task).toMatchObject({ state: 'submitted', version: 0, agentTaskId: null, history: [{ messageId: 'm1' }] });
    expect(await store.get(tenant, task.id)).toMatchObject({ id: task.id });
    expect(await store.get('someone-else', task.id)).toBeUndefined();
  });

  it('a cancel that read the task before a completion committed is refused as stale: the completion stands', async () => {
    const read = await created();
    const working = await store.transition(read, { state: 'working', agentTaskId: 'agent-1' });
    expect(working).toMatchObject({ changed: true, task: { state: 'working', version: 1, agentTaskId: 'agent-1' } });
    const seenByCancel = (working as { task: StoredTask }).task;
    const completion = await store.transition(seenByCancel, {
      state: 'completed',
      artifacts: [{ artifactId: 'a1', parts: [{ text: 'done' }] }],
    });
    expect(completion).toMatchObject({ changed: true, task: { state: 'completed', version: 2 } });
    // The cancel read version 1 (working, cancelable) before the completion committed.
    const cancel = await store.transition(seenByCancel, { state: 'canceled' });
    expect(cancel).toMatchObject({ changed: false, reason: 'stale', task: { state: 'completed', version: 2 } });
    expect(await store.get(tenant, read.id)).toMatchObject({
      state: 'completed',
      version: 2,
      artifacts: [{ artifactId: 'a1' }],
    });
  });

  it('of concurrent changes from one version exactly one is applied', async () => {
    const read = await created();
    const outcomes = await Promise.all([
      ...Array.from({ length: 5 }, () => store.transition(read, { state: 'canceled' })),
      ...Array.from({ length: 5 }, () => store.transition(read, { state: 'completed' })),
    ]);
    const applied = outcomes.filter((o) => o.changed);
    expect(applied).toHaveLength(1);
    const winner = (applied[0] as { task: StoredTask }).task;
    expect(outcomes.filter((o) => !o.changed).every((o) => o.changed === false && o.reason === 'stale')).toBe(true);
    expect(await store.get(tenant, read.id)).toMatchObject({ state: winner.state, version: 1 });
  });

  it('refuses illegal transitions: out of a terminal state, back to submitted', async () => {
    const read = await created();
    const done = await store.transition(read, { state: 'completed' });
    const completed = (done as { task: StoredTask }).task;
    expect(await store.transition(completed, { state: 'canceled' })).toMatchObject({
      changed: false,
      reason: 'illegal',
    });
    expect(await store.transition(completed, { state: 'working' })).toMatchObject({
      changed: false,
      reason: 'illegal',
    });
    const other = await created();
    const working = (await store.transition(other, { state: 'working' })) as { task: StoredTask };
    expect(await store.transition(working.task, { state: 'submitted' })).toMatchObject({
      changed: false,
      reason: 'illegal',
    });
    expect(await store.get(tenant, read.id)).toMatchObject({ state: 'completed', version: 1 });
  });

  it("does not change another tenant's task", async () => {
    const read = await created();
    expect(await store.transition({ ...read, tenant: 'someone-else' }, { state: 'canceled' })).toEqual({
      changed: false,
      reason: 'missing',
    });
    expect(await store.get(tenant, read.id)).toMatchObject({ state: 'submitted', version: 0 });
  });

  it("pages an agent's tasks newest first by a cursor", async () => {
    const agent = `pager-${randomUUID().slice(0, 8)}`;
    const tasks: StoredTask[] = [];
    for (let i = 0; i < 5; i++) tasks.push(await created(agent));
    // Newest first by creation time, to the millisecond; tasks created within one millisecond come in descending
    // id order (the cursor's key is the pair), so the expected order is the store's key, not the loop's.
    const newestFirst = [...tasks]
      .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
      .map((t) => t.id);
    const first = await store.list(tenant, agent, { size: 2 });
    expect(first).toMatchObject({ total: 5, more: true });
    const second = await store.list(tenant, agent, { size: 2, after: first.tasks[1].id });
    const third = await store.list(tenant, agent, { size: 2, after: second.tasks[1].id });
    expect(third.more).toBe(false);
    expect([...first.tasks, ...second.tasks, ...third.tasks].map((t) => t.id)).toEqual(newestFirst);
    expect((await store.list('someone-else', agent, { size: 10 })).total).toBe(0);
  });
  it('purges the tasks that ended or waited for their client since before the cutoff, with their events, push configs and push dead letters; keeps the others', async () => {
    const ended = async (
      state: 'completed' | 'failed' | 'canceled' | 'working' | 'input-required',
      daysAgo: number,
      published = true,
    ) => {
      let task = await created();
      if (state !== 'working')
        task = ((await store.transition(task, { state: 'working' })) as { task: StoredTask }).task;
      task = ((await store.transition(task, { state })) as { task: StoredTask }).task;
      await db.query(
        `UPDATE a2a_tasks SET updated_at = now() - make_interval(days => $2), published_seq = CASE WHEN $3 THEN event_seq ELSE 0 END WHERE id = $1`,
        [task.id, daysAgo, published],
      );
      await db.query(
        `INSERT INTO a2a_push_configs (task_id, id, tenant, url, wire_version) VALUES ($1, 'hook', $2, 'http://127.0.0.1:9/hook', '1.0')`,
        [task.id, tenant],
      );
      await db.query(
        `INSERT INTO a2a_push_dead_letters (id, tenant, task_id, agent, config_id, url, task_version, task_state, attempts, last_error) VALUES ($1, $2, $3, 'echo', 'hook', 'http://127.0.0.1:9/hook', $4, $5, 5, 'HTTP 500')`,
        [randomUUID(), tenant, task.id, task.version, task.state],
      );
      return task.id;
    };
    const old = [
      await ended('completed', 31),
      await ended('failed', 40),
      await ended('canceled', 31),
      await ended('input-required', 31),
    ];
    const kept = [
      await ended('completed', 29),
      await ended('working', 60),
      await ended('completed', 31, false),
      await ended('input-required', 29),
    ];
    const cutoff = new Date(Date.now() - 30 * 86400000);
    // In batches of at most two, until none is left (the database is shared: other suites' old tasks would go too).
    const batches: number[] = [];
    for (let n = -1; n !== 0 && batches.length < 100;) batches.push((n = await store.purgeOlderThan(cutoff, 2)));
    expect(batches.every((n) => n <= 2) && batches.reduce((a, b) => a + b, 0) >= old.length && batches[0] === 2).toBe(
      true,
    );
    const count = async (table: string, ids: string[]) =>
      Number((await db.query(`SELECT count(*) AS n FROM ${table} WHERE task_id = ANY($1)`, [ids]))[0].n);
    for (const table of ['a2a_task_events', 'a2a_push_configs', 'a2a_push_dead_letters']) {
      expect([table, await count(table, old)]).toEqual([table, 0]);
      expect([table, (await count(table, kept)) > 0]).toEqual([table, true]);
    }
    for (const id of old) expect(await store.get(tenant, id)).toBeUndefined();
    // Kept: one that ended 29 days ago, one still working (60 days idle), one whose events are not all published, one
    // waiting for its client for 29 days.
    for (const id of kept) expect(await store.get(tenant, id)).toBeDefined();
  });
});
