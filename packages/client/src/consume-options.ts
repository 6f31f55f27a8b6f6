import type { ConsumeOptions } from './consumer-types';
import { checkWhole } from './option-checks';

/** The consumer's reconnect backoff when its options name none. */
export const RECONNECT_DEFAULTS = { maxAttempts: Infinity, initialDelayMs: 200, maxDelayMs: 10000 };
/** The longest nack delay and ack deadline the runtime takes (an answer past it is refused). */
const MAX_ANSWER_DELAY_MS = 3_600_000;

/** Options the runtime would refuse, or that would stall the consumer, refused when it is made (a `RangeError`). */
export function checkConsumeOptions(o: ConsumeOptions): void {
  checkWhole('window', o.window, 1, 1000);
  checkWhole('concurrency', o.concurrency, 1, 1_000_000);
  checkWhole('nackDelayMs', o.nackDelayMs, 0, MAX_ANSWER_DELAY_MS);
  if (o.ackDeadlineMs !== false) checkWhole('ackDeadlineMs', o.ackDeadlineMs, 1, MAX_ANSWER_DELAY_MS);
  checkWhole('reconnect.initialDelayMs', o.reconnect?.initialDelayMs, 1, MAX_ANSWER_DELAY_MS);
  checkWhole('reconnect.maxDelayMs', o.reconnect?.maxDelayMs, 1, MAX_ANSWER_DELAY_MS);
  const initial = o.reconnect?.initialDelayMs ?? RECONNECT_DEFAULTS.initialDelayMs;
  const max = o.reconnect?.maxDelayMs ?? RECONNECT_DEFAULTS.maxDelayMs;
  if (max < initial)
    throw new RangeError(`reconnect.maxDelayMs (${max}) must be at least reconnect.initialDelayMs (${initial})`);
}
