import type { Answer, WireDelivery } from './connection';

/** The separator between a batch's delivery id and an event's index in it, in the id of the event's part. */
const PART = '#';

interface Pending {
  /** Each part's answer, as it comes. */
  answers: (Answer | undefined)[];
  left: number;
  /** The batch's answer once the runtime took it; undefined when it did not (or the connection ended first). */
  outcome: Promise<Answer['action'] | undefined>;
  settle: (action: Answer['action'] | undefined) => void;
  /** Per action, whether a part answered so was accepted: one promise per action, shared by the batch's parts. */
  accepted: Map<Answer['action'], Promise<boolean>>;
  /** Until when the batch's deadline was last extended (epoch ms). */
  extendedUntil: number;
  /** Extends the batch while any part of it waits or runs. */
  timer?: NodeJS.Timeout;
}

/** The runtime batch a part's delivery id belongs to, when it is a part. */
export function batchIdOf(deliveryId: string): string | undefined {
  const at = deliveryId.lastIndexOf(PART);
  return at < 0 ? undefined : deliveryId.slice(0, at);
}

/**
 * A batched subscription's batch (`{type:"batch",deliveryId,events}`, docs/api.md) is one delivery at the runtime,
 * answered once for all its events. The consumer handles events: each event of a batch is handed over as a delivery
 * of its own, `<deliveryId>#<index>`, and the batch is answered once every part is: `ack` when every part was acked,
 * `reject` (the first rejected part's reason) when any was rejected, else `nack` with the longest delay asked. The
 * runtime splits a refused batch down to the event the client refuses, and redelivers a nacked one whole (the
 * consumer's dedupe acks the events it handled already). A part's answer is accepted when the runtime took the
 * batch's and it was the part's own (an acked part of a rejected batch is not: it comes again). An extension of any
 * part extends the batch, forwarded when it reaches a third of its length past the last one forwarded (every part
 * of a running batch asks), so a batch's deadline is never shortened by it.
 */
export class BatchParts {
  private readonly pending = new Map<string, Pending>();

  constructor(
    private readonly send: (a: Answer) => Promise<boolean>,
    /**
     * How far to extend a batch from when it arrives until it is answered (the consumer's ack deadline; undefined: not
     * extended): its parts may wait behind each other in the consumer longer than the subscription's ack timeout.
     */
    private readonly deadlineMs?: Promise<number | undefined>,
  ) {}

  /** The batch's events, each as the delivery of its part. */
  split(deliveryId: string, events: WireDelivery['event'][]): WireDelivery[] {
    let settle!: Pending['settle'];
    const batch: Pending = {
      answers: new Array<Answer | undefined>(events.length),
      left: events.length,
      outcome: new Promise((resolve) => (settle = resolve)),
      settle,
      accepted: new Map(),
      extendedUntil: 0,
    };
    this.pending.set(deliveryId, batch);
    void this.deadlineMs?.then((deadlineMs) => {
      if (deadlineMs === undefined || this.pending.get(deliveryId) !== batch) return;
      const extend = { deliveryId: `${deliveryId}${PART}0`, action: 'extend' as const, deadlineMs };
      batch.timer = setInterval(() => void this.answer(extend)?.catch(() => false), Math.max(1, deadlineMs / 3));
      batch.timer.unref();
    });
    return events.map((event, i) => ({ deliveryId: `${deliveryId}${PART}${i}`, event }));
  }

  /**
   * An answer for a part, as the runtime's verdict on its batch; undefined when `a` is not for a part here. The
   * parts of a batch answered alike get the same promise (a batch of 500 makes one, not 500).
   */
  answer(a: Answer): Promise<boolean> | undefined {
    const batchId = batchIdOf(a.deliveryId);
    const batch = batchId === undefined ? undefined : this.pending.get(batchId);
    if (!batch || batchId === undefined) return undefined;
    if (a.action === 'extend') {
      const until = Date.now() + (a.deadlineMs ?? 0);
      if (until < batch.extendedUntil + (a.deadlineMs ?? 0) / 3) return Promise.resolve(true);
      batch.extendedUntil = until;
      return this.send({ ...a, deliveryId: batchId });
    }
    const index = Number(a.deliveryId.slice(batchId.length + 1));
    if (!(index >= 0 && index < batch.answers.length) || batch.answers[index]) return NOT_ACCEPTED;
    batch.answers[index] = a;
    let accepted = batch.accepted.get(a.action);
    if (!accepted) batch.accepted.set(a.action, (accepted = batch.outcome.then((action) => action === a.action)));
    if (--batch.left === 0) {
      this.pending.delete(batchId);
      clearInterval(batch.timer);
      const answer = combined(batchId, batch.answers as Answer[]);
      this.send(answer).then(
        (taken) => batch.settle(taken ? answer.action : undefined),
        () => batch.settle(undefined),
      );
    }
    return accepted;
  }

  /** The connection ended: the batches not answered yet are the runtime's to redeliver. */
  close(): void {
    for (const batch of this.pending.values()) {
      clearInterval(batch.timer);
      batch.settle(undefined);
    }
    this.pending.clear();
  }
}

const NOT_ACCEPTED = Promise.resolve(false);

/** One answer for a batch from its parts': a reject wins, then a nack (the longest delay), else ack. */
function combined(deliveryId: string, answers: Answer[]): Answer {
  const rejected = answers.find((a) => a.action === 'reject');
  if (rejected) return { deliveryId, action: 'reject', reason: rejected.reason };
  if (!answers.some((a) => a.action === 'nack')) return { deliveryId, action: 'ack' };
  const delays = answers.flatMap((a) => (a.action === 'nack' && a.delayMs !== undefined ? [a.delayMs] : []));
  return { deliveryId, action: 'nack', delayMs: delays.length > 0 ? Math.max(...delays) : undefined };
}
