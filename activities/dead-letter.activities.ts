import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { messageIdOf, type WebhookResult } from '@libs/delivery';
import { EventFrame, frameFromAttributes } from '@libs/frame';
import type { ClaimedBatch, ClaimedLetter, DeadLetterReplayStore, SubscriptionEntity } from '@libs/storage';
import {
  REPLAY_BATCH_INTERRUPTED,
  type DeadLetterActivities,
  type ReplayBatchInput,
  type ReplayBatchResult,
} from '../contracts';

export interface DeadLetterActivityDeps {
  replays: Pick<DeadLetterReplayStore, 'claim' | 'markReplayed' | 'markFailed' | 'release' | 'countIn'>;
  /** The subscription a replay delivers to (any status); undefined once deleted (its letters went with it). */
  subscription(id: string): Promise<SubscriptionEntity | undefined>;
  /** The subscription's sink path: its webhook, or its stream clients wherever they are connected. */
  sender: {
    send(
      target: SubscriptionEntity,
      frame: EventFrame,
      messageId: string,
      signal?: AbortSignal,
    ): Promise<WebhookResult>;
  };
  /** One retention purge (RetentionPurge); `retentionDays` from the schedule's input. */
  purgeExpired(retentionDays: number): Promise<number>;
  /** How long one delivery may take (the webhook timeout): a claim outlasts its batch by this much per letter. */
  deliveryTimeoutMs: number;
  /** Aborted when the instance shuts down: the batch lets its claims go and is retried elsewhere. */
  shutdownSignal: AbortSignal;
}

/**
 * The dead-letter activities: one batch of a replay (dlq-replay workflow), and one retention purge (dlq-retention
 * schedule). A batch claims its letters, sends them one at a time, paced at the replay's rate, through the
 * subscription's own sink path (never a re-publish: no other subscriber sees them), with the `webhook-id` the
 * original delivery had, and marks each one as its answer comes: delivered (`replayed_at`) or failed (the new last
 * error). It heartbeats the last letter done, so a retried attempt resumes after it; the counts it returns are
 * read back from Postgres for its whole id range, so a crash and a retry never count a letter twice.
 */
export function createDeadLetterActivities(deps: DeadLetterActivityDeps): DeadLetterActivities {
  return {
    async replayDeadLetters(input: ReplayBatchInput): Promise<ReplayBatchResult> {
      const ctx = Context.current();
      const resumed = (ctx.info.heartbeatDetails as { lastId?: string } | undefined)?.lastId;
      const subscription = await deps.subscription(input.subscriptionId);
      if (!subscription) {
        ctx.log.warn('replay ends: its subscription was deleted, and its dead letters with it', {
          replayId: input.replayId,
        });
        return { done: true, replayed: 0, failed: 0, heldElsewhere: 0 };
      }
      const intervalMs = 1000 / input.ratePerSecond;
      const claimMs = Math.ceil(input.limit * (intervalMs + deps.deliveryTimeoutMs)) + 60_000;
      const scope = {
        replayId: input.replayId,
        subscriptionId: input.subscriptionId,
        selection: input.selection,
        upToId: input.upToId,
      };
      const batch: ClaimedBatch = await deps.replays.claim(scope, resumed ?? input.afterId, input.limit, claimMs);
      const stop = AbortSignal.any([ctx.cancellationSignal, deps.shutdownSignal]);
      let lastDone = resumed;
      // A heartbeat on a clock, not only per letter: one slow delivery (up to the webhook timeout) must not pass
      // for a dead batch and have Temporal start a second attempt beside this one.
      const beat = setInterval(
        () => ctx.heartbeat({ lastId: lastDone }),
        Math.max(100, Math.floor((ctx.info.heartbeatTimeoutMs ?? 10_000) / 3)),
      );
      try {
        let next = Date.now();
        for (let i = 0; i < batch.letters.length; i++) {
          const wait = next - Date.now();
          if (wait > 0) await pause(wait, stop);
          if (stop.aborted) {
            await deps.replays.release(
              input.replayId,
              batch.letters.slice(i).map((l) => l.id),
            );
            return await interrupted(ctx, lastDone);
          }
          next = Math.max(next + intervalMs, Date.now());
          const letter = batch.letters[i];
          // A cancel does not abort the letter in flight: its sink may have it already, and a delivered letter
          // must be marked (or it would stay dead and be sent again by the next replay). It ends within the webhook
          // timeout; the batch stops after it. A shutdown does abort it: the letter is let go and resumed elsewhere
          // (at least once, as a delivery cut by a crash).
          const result = await send(deps, subscription, letter, deps.shutdownSignal);
          if (result.ok) await deps.replays.markReplayed(input.replayId, letter.id);
          else if (stop.aborted) {
            await deps.replays.release(
              input.replayId,
              batch.letters.slice(i).map((l) => l.id),
            );
            return await interrupted(ctx, lastDone);
          } else await deps.replays.markFailed(input.replayId, letter.id, result.error ?? 'failed');
          lastDone = letter.id;
          ctx.heartbeat({ lastId: lastDone });
        }
      } finally {
        clearInterval(beat);
      }
      const lastId = batch.lastId ?? resumed;
      const counts =
        lastId === undefined
          ? { replayed: 0, failed: 0 }
          : await deps.replays.countIn(input.replayId, input.afterId, lastId);
      return { lastId, done: batch.lastId === undefined, ...counts, heldElsewhere: batch.heldElsewhere };
    },

    async purgeExpiredDeadLetters(input: { retentionDays: number }): Promise<number> {
      return deps.purgeExpired(input.retentionDays);
    },
  };
}

/** One letter to its subscription; a letter that holds no event (a record that was not one) cannot be sent. */
async function send(
  deps: DeadLetterActivityDeps,
  subscription: SubscriptionEntity,
  letter: ClaimedLetter,
  signal: AbortSignal,
): Promise<WebhookResult> {
  if (
    typeof letter.attributes.id !== 'string' ||
    typeof letter.attributes.source !== 'string' ||
    typeof letter.attributes.type !== 'string'
  ) {
    return {
      ok: false,
      error: 'replay: the dead letter holds no CloudEvent (its record was not one); nothing to send',
    };
  }
  const frame = frameFromAttributes(letter.attributes, letter.data);
  const messageId = messageIdOf({
    subscriptionId: subscription.id,
    topic: letter.topic,
    partition: letter.partition,
    offset: letter.offset,
  });
  try {
    return await deps.sender.send(subscription, frame, messageId, signal);
  } catch (e) {
    return { ok: false, error: `replay: ${(e as Error).message}` };
  }
}

/** Cancelled (from the Temporal UI): ends as cancelled; shut down: fails retryably, to resume after `lastDone`. */
async function interrupted(ctx: Context, lastDone: string | undefined): Promise<never> {
  if (ctx.cancellationSignal.aborted) {
    await ctx.cancelled;
  }
  throw ApplicationFailure.retryable(
    'the instance is shutting down; the batch resumes elsewhere',
    REPLAY_BATCH_INTERRUPTED,
    { lastId: lastDone },
  );
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
