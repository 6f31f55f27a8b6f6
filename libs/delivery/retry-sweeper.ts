import { frameFromAttributes } from '@libs/frame';
import { createLogger } from '@libs/logging';
import type { ParkedDelivery, SubscriptionEntity } from '@libs/storage';
import type { DispatchContext } from './dispatch-context';
import { FailurePolicy, messageIdOf } from './failure-policy';
import { orderingOf } from './ordering';

/** Parked deliveries attempted per sweep, and how often the sweep runs. */
export const SWEEP_BATCH = 32;
export const SWEEP_INTERVAL_MS = 1000;

/**
 * Attempts the parked deliveries of the loop's subscriptions that are due, in the background of the loop: at
 * most one sweep at a time, at most every {@link SWEEP_INTERVAL_MS}; each answer goes to the {@link FailurePolicy}.
 */
export class RetrySweeper {
  private readonly log = createLogger('DispatchLoop');
  private sweptAt = 0;
  private sweeping?: Promise<void>;
  /** Aborted when the run ends: sweep attempts in flight give up (their deliveries stay parked). */
  private stopping = new AbortController();

  constructor(
    private readonly ctx: DispatchContext,
    private readonly failures: FailurePolicy,
  ) {}

  /** A run starts: sweeps may go out. */
  start(): void {
    this.stopping = new AbortController();
  }

  /** The run ends: the sends of a sweep in flight abort; resolves when it finished. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.sweeping;
  }

  /** Starts a sweep if one is due and none is out. */
  tick(): void {
    const { ctx } = this;
    if (this.sweeping || Date.now() - this.sweptAt < SWEEP_INTERVAL_MS || !ctx.gateOpen()) return;
    this.sweptAt = Date.now();
    // Not the parked deliveries of a subscription whose breaker is not closed (its sink is down), nor of one whose
    // lanes deliver their backlog in order now (ordered recovery, lane-runner.ts), nor of a `key`-ordered one (its
    // lanes deliver each key's parked deliveries in order, held-keys.ts).
    const held = new Set(
      [...ctx.lanes.values()]
        .filter((l) => l.recovering || orderingOf(l.subscription) === 'key')
        .map((l) => l.subscription.id),
    );
    const subscriptions = new Map(
      [...ctx.lanes.values()]
        .filter((l) => !held.has(l.subscription.id) && ctx.breakers.of(l.subscription.id).state === 'CLOSED')
        .map((l) => [l.subscription.id, l.subscription]),
    );
    if (subscriptions.size === 0) return;
    this.sweeping = ctx.deps.retries
      .due([...subscriptions.keys()], SWEEP_BATCH, undefined, ctx.deps.scope)
      .then((due) => {
        // One signal for the sweep's sends: the run ends, or the gate shuts.
        const signal = AbortSignal.any([this.stopping.signal, ctx.gateSignal()]);
        return Promise.allSettled(due.map((d) => this.retry(d, subscriptions.get(d.subscriptionId)!, signal)));
      })
      .then((results) => {
        const failed = results.filter((r) => r.status === 'rejected' && !ctx.noteFenced(r.reason));
        if (failed.length > 0) {
          this.log.warn(
            { failed: failed.length, error: String((failed[0] as PromiseRejectedResult).reason) },
            'some parked deliveries could not be recorded; they stay parked',
          );
        }
      })
      .catch((e: unknown) =>
        this.log.warn({ error: (e as Error).message }, 'retry sweep failed; next sweep tries again'),
      )
      .finally(() => (this.sweeping = undefined));
  }

  private async retry(parked: ParkedDelivery, subscription: SubscriptionEntity, signal: AbortSignal): Promise<void> {
    if (!this.ctx.gateOpen()) return;
    // The breaker may have opened since the sweep started (another attempt failed): this one waits too.
    const breaker = this.ctx.breakers.of(subscription.id);
    const permit = breaker.acquire();
    if (!permit) return;
    const frame = frameFromAttributes(parked.attributes, parked.data);
    let result;
    try {
      result = await this.ctx.deps.sender.send(subscription, frame, messageIdOf(parked), signal);
    } catch (e) {
      breaker.release(permit);
      throw e;
    }
    if (signal.aborted) {
      breaker.release(permit);
      return;
    }
    this.failures.answered(subscription, permit, result);
    await this.failures.parked(parked, subscription, frame, result);
  }
}
