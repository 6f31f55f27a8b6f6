import { isPinnedKafkajs } from './kafkajs-encoding';

/** kafkajs's check interval for requests queued behind the in-flight limit (src/network/requestQueue). */
const CHECK_PENDING_REQUESTS_INTERVAL_MS = 10;

/** The part of kafkajs's `RequestQueue` (src/network/requestQueue/index.js) the fix touches. */
interface KafkajsRequestQueue {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

let installed: boolean | undefined;

/**
 * Stops kafkajs's request queues from polling themselves every millisecond while nothing waits.
 *
 * In kafkajs 2.2.4 every broker connection's `RequestQueue`, after its first answer, re-arms a timer at
 * `throttledUntil - Date.now()`: with no throttle that is negative, so Node runs it after 1 ms, and the check
 * re-arms it, for as long as the connection lives (kafkajs issues #1556, #1604, #1704; unreleased upstream). This
 * runtime holds a connection per owned partition's reader besides its producer's and admin's, so an idle instance
 * ran thousands of these timers a second (docs/benchmarks.md).
 *
 * The replacement schedules a check only when one can do something: requests are queued (in 10 ms, or when the
 * broker's throttle ends), or a throttle is in force. Nothing else needs the timer: `push` sends a request at once
 * when it may, and queues it (scheduling a check) when it may not; every answer and every request timeout checks
 * the queue. Only for the pinned kafkajs release, whose method this mirrors; idempotent; process-wide.
 */
export function installIdleRequestQueueFix(): boolean {
  if (installed !== undefined) return installed;
  if (!isPinnedKafkajs('the request queue fix')) return (installed = false);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const RequestQueue = require('kafkajs/src/network/requestQueue') as { prototype: KafkajsRequestQueue };
  RequestQueue.prototype.scheduleCheckPendingRequests = function scheduleCheckPendingRequests(
    this: KafkajsRequestQueue,
  ): void {
    if (this.throttleCheckTimeoutId) return;
    const untilUnthrottled = this.throttledUntil - Date.now();
    let delay: number;
    if (this.pending.length > 0) delay = untilUnthrottled > 0 ? untilUnthrottled : CHECK_PENDING_REQUESTS_INTERVAL_MS;
    else if (untilUnthrottled > 0) delay = untilUnthrottled;
    else return;
    this.throttleCheckTimeoutId = setTimeout(() => {
      this.throttleCheckTimeoutId = null;
      this.checkPendingRequests();
    }, delay);
  };
  return (installed = true);
}
