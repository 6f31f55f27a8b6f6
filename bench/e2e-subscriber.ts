import { monotonicMs } from './support';
import { startSubscriber, type SubscriberKind, type SubscriberTarget } from './stream-subscribers';

/**
 * One stream subscriber of bench:e2e's client comparison in a process of its own (`fork`ed by the bench), so each
 * subscriber's CPU is metered apart and none shares an event loop with the publishers or the others. It stamps each
 * event's arrival on the host's monotonic clock (`process.hrtime`, comparable across processes), and answers the
 * bench's `collect` with the stamps of one run once it holds all of them.
 *
 * Messages: in `{ start: SubscriberTarget }`, `{ collect: prefix, total }`, `{ close: true }`; out `{ ready: true }`,
 * `{ collected: prefix, stamps: [id, ms][] }`, `{ error: message }`.
 */
const kind = process.argv[2] as SubscriberKind;
const arrivals = new Map<string, Map<string, number>>();
const waiting = new Map<string, number>();

function record(id: string): void {
  const at = monotonicMs();
  const prefix = id.slice(0, id.lastIndexOf('-'));
  let run = arrivals.get(prefix);
  if (!run) arrivals.set(prefix, (run = new Map()));
  if (!run.has(id)) run.set(id, at);
  answer(prefix);
}

function answer(prefix: string): void {
  const total = waiting.get(prefix);
  const run = arrivals.get(prefix);
  if (total === undefined || (run?.size ?? 0) < total) return;
  waiting.delete(prefix);
  process.send!({ collected: prefix, stamps: [...run!.entries()] });
  arrivals.delete(prefix);
}

let close: (() => Promise<void>) | undefined;
process.on('message', (m: { start?: SubscriberTarget; collect?: string; total?: number; close?: true }) => {
  if (m.start)
    startSubscriber(kind, m.start, record).then(
      (stop) => {
        close = stop;
        process.send!({ ready: true });
      },
      (e: unknown) => process.send!({ error: String(e) }),
    );
  else if (m.collect !== undefined) {
    waiting.set(m.collect, m.total!);
    answer(m.collect);
  } else if (m.close) void (close?.() ?? Promise.resolve()).finally(() => process.exit(0));
});
