import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource, EntityManager } from 'typeorm';
import type { EventFrame } from '@libs/frame';
import { createLogger } from '@libs/logging';
import { SubscriptionStore, TaskPublicationRows } from '@libs/storage';
import { taskEventToFrame } from '../protocol/a2a-frame.adaptor';
import { eventsTopicOf } from '../relay/request-topic';
import type { TaskEventKind } from './task-events';

/** What the publisher writes with: a producer, and the topic admin that makes an agent's events topic when missing. */
export interface EventsTopicWriter {
  publishAll(topic: string, frames: EventFrame[]): Promise<unknown>;
  ensureTopic(topic: string): Promise<unknown>;
}

export interface TaskEventPublisherOptions {
  /**
   * How long after a task's change its publish starts: the task's further changes meanwhile go in the same run (a task
   * the agent finishes at once is one run), and the run is off the path of the change's caller.
   */
  delayMs: number;
  /** How often the sweep looks for tasks whose events were left unpublished (0: no sweep, e.g. a gateway). */
  sweepMs: number;
  /** How old a task's last change must be for the sweep to take it (younger ones are the changer's to publish). */
  sweepAfterMs: number;
}

/** How long after a task's change its events are published, by default (see TaskEventPublisherOptions.delayMs). */
export const PUBLISH_DELAY_MS = 50;
/** How long whether an events topic has a subscription is taken as known: a new observer's events start within it. */
const OBSERVED_TTL_MS = 2000;
/** Most publishes at once per process (each holds a pool connection while Kafka answers). */
const MAX_CONCURRENT_PUBLISHES = 2;
/** Most tasks with a publish waiting or under way per process; a change past it is left to the sweep. */
const MAX_WAITING_RUNS = 1000;
/** Most pages one sweep round takes (PAGE tasks each). */
const SWEEP_PAGES = 50;
/** Most events one publish reads and writes at once. */
const PAGE = 100;

/**
 * Copies each task's event log (task-events.ts, in Postgres) to its agent's events topic in Kafka, for observers
 * (docs/a2a.md#observers): at least once, and for each task in seq order, while the topic has a subscription (the
 * events of a task changed while nobody observed its agent are not written). `a2a_tasks.published_seq` is the last seq
 * written to Kafka: the process that committed a change publishes what follows it, shortly after the commit
 * ({@link changed}: in the background, `delayMs` later, one run per task at a time); and the workers' sweep takes the tasks a crash,
 * or Kafka being down, left behind. A task's events are read from `published_seq`, written in one produce request,
 * then `published_seq` is moved on (forwards only), under the task's advisory lock: one writer per task at a time
 * on all instances, each going on from where the last one left. A crash between the write to Kafka and the move of
 * `published_seq` writes those events again: an observer may see an event twice (same id, `<taskId>.<seq>`), never
 * a gap, and the first copy of each event comes after the first copy of the one before.
 */
export class TaskEventPublisher {
  private readonly log = createLogger('A2AEventPublisher');
  /** The tasks being published in this process, and whether another change came meanwhile. */
  private readonly running = new Map<string, { again: boolean; done: Promise<void> }>();
  private readonly ensured = new Set<string>();
  /** Whether each events topic had a subscription when last asked, and when; the questions under way. */
  private readonly observed = new Map<string, { at: number; value: boolean }>();
  private readonly asking = new Map<string, Promise<boolean>>();
  /** Publishes holding a connection now, and those waiting for one of the MAX_CONCURRENT_PUBLISHES. */
  private active = 0;
  private readonly slots: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private closed = false;

  private readonly tasks: TaskPublicationRows<TaskEventKind>;
  private readonly subscriptions: SubscriptionStore;

  constructor(
    db: DataSource,
    private readonly writer: EventsTopicWriter,
    private readonly options: TaskEventPublisherOptions = { delayMs: PUBLISH_DELAY_MS, sweepMs: 0, sweepAfterMs: 5000 },
  ) {
    this.tasks = new TaskPublicationRows(db);
    this.subscriptions = new SubscriptionStore(db);
    if (options.sweepMs > 0) this.schedule();
  }

  /**
   * A change of the task committed: its new events go to Kafka, in the background, if its agent's events topic has
   * an observer (a subscription; known for OBSERVED_TTL_MS). Those of an agent nobody observes are left to the sweep,
   * which marks them published in bulk: a task change costs nothing here while nobody watches.
   */
  changed(task: { id: string; tenant: string; agent: string }): void {
    if (this.closed) return;
    void this.isObserved(eventsTopicOf(task.tenant, task.agent)).then(
      (observed) => observed && this.start(task.id),
      () => undefined, // left for the sweep
    );
  }

  private start(taskId: string): void {
    if (this.closed) return;
    const run = this.running.get(taskId);
    if (run) {
      run.again = true;
      return;
    }
    // Kafka slow or down: the runs waiting pile up to a bound, past which a change is left to the sweep.
    if (this.running.size >= MAX_WAITING_RUNS) return;
    const state = { again: false, done: Promise.resolve() };
    state.done = (async () => {
      await sleep(this.options.delayMs);
      do {
        state.again = false;
        try {
          await this.publish(taskId);
        } catch (e) {
          // Left for the sweep (a worker's, within sweepMs once the task is sweepAfterMs old).
          this.log.warn(
            { task: taskId, error: (e as Error).message },
            "could not publish the task's events; the sweep will",
          );
          return;
        }
      } while (state.again && !this.closed);
    })().finally(() => this.running.delete(taskId));
    this.running.set(taskId, state);
  }

  /**
   * Publishes the task's events not yet published; answers how many it wrote. One writer per task at a time, on
   * every instance: the publish holds the task's advisory lock (a transaction of its own; the task's row is not
   * locked, so its changes go on meanwhile), and the next writer reads `published_seq` once the lock is its own.
   */
  async publish(taskId: string): Promise<number> {
    // A publish holds a pool connection while Kafka answers: at most MAX_CONCURRENT_PUBLISHES at once, so that a
    // slow Kafka never takes the pool the gateway and the deliveries share.
    while (this.active >= MAX_CONCURRENT_PUBLISHES) await new Promise<void>((resolve) => this.slots.push(resolve));
    this.active++;
    try {
      return await this.tasks.underTaskLock(taskId, (manager) => this.publishLocked(manager, taskId));
    } finally {
      this.active--;
      this.slots.shift()?.();
    }
  }

  private async publishLocked(db: EntityManager, taskId: string): Promise<number> {
    let written = 0;
    for (;;) {
      const rows = await this.tasks.unpublished(db, taskId, PAGE);
      if (rows.length === 0) return written;
      const topic = eventsTopicOf(rows[0].tenant, rows[0].agent);
      await this.ensure(topic);
      await this.writer.publishAll(
        topic,
        rows.map((r) =>
          taskEventToFrame({ taskId, seq: r.seq, kind: r.kind, payload: r.payload }, r.agent, r.created_at),
        ),
      );
      const last = rows[rows.length - 1].seq;
      await this.tasks.published(db, taskId, last);
      written += rows.length;
      if (rows.length < PAGE) return written;
    }
  }

  /**
   * The tasks left behind (their last change older than sweepAfterMs, events not all published): those of an observed
   * agent are published, the others marked published (nobody was watching). Answers how many tasks it took.
   */
  async sweep(): Promise<number> {
    const rows = await this.tasks.leftBehind(this.options.sweepAfterMs, PAGE);
    const unobserved: string[] = [];
    for (const { id, tenant, agent } of rows) {
      if (this.closed) break;
      if (this.running.has(id)) continue;
      if (!(await this.isObserved(eventsTopicOf(tenant, agent)))) {
        unobserved.push(id);
        continue;
      }
      await this.publish(id);
    }
    if (unobserved.length > 0) await this.tasks.allPublished(unobserved);
    return rows.length;
  }

  /**
   * Sweeps page after page while pages come full (at most SWEEP_PAGES a round): every task a worker sees change
   * passes here when its agent has no observer, so one page per round would fall behind past PAGE / sweepMs tasks/s.
   */
  private async sweepAll(): Promise<void> {
    for (let page = 0; page < SWEEP_PAGES && !this.closed && (await this.sweep()) === PAGE; page++);
  }

  /** Whether any subscription reads the topic (asked of Postgres at most once per OBSERVED_TTL_MS per topic). */
  private isObserved(topic: string): Promise<boolean> {
    const known = this.observed.get(topic);
    if (known && Date.now() - known.at < OBSERVED_TTL_MS) return Promise.resolve(known.value);
    let asking = this.asking.get(topic);
    if (!asking) {
      const at = Date.now();
      asking = this.subscriptions
        .anyOn(topic)
        .then((observed) => {
          this.observed.set(topic, { at, value: observed });
          return observed;
        })
        .finally(() => this.asking.delete(topic));
      this.asking.set(topic, asking);
    }
    return asking;
  }

  /** Stops the sweep and waits for the publishes under way. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.sweeping;
    await Promise.all([...this.running.values()].map((r) => r.done));
  }

  private async ensure(topic: string): Promise<void> {
    if (this.ensured.has(topic)) return;
    // An agent registered before events topics existed has none yet: made on first use, as at registration.
    await this.writer.ensureTopic(topic);
    this.ensured.add(topic);
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.sweeping = this.sweepAll()
        .then(
          () => undefined,
          (e: Error) => void this.log.warn({ error: e.message }, 'task events sweep failed; next in sweepMs'),
        )
        .finally(() => {
          this.sweeping = undefined;
          if (!this.closed) this.schedule();
        });
    }, this.options.sweepMs);
    this.timer.unref();
  }
}
