import { waitFor } from '../../test/support/wait-for';
import { installIdleRequestQueueFix } from './kafkajs-request-queue';

/** kafkajs's own request queue (one per broker connection), with the fix installed, driven without a broker. */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const RequestQueue = require('kafkajs/src/network/requestQueue') as new (options: object) => {
  throttledUntil: number;
  pending: unknown[];
  checkPendingRequests(): void;
  push(request: { entry: object; expectResponse: boolean; sendRequest(): void }): void;
  fulfillRequest(answer: { correlationId: number; payload: Buffer; size: number }): void;
  destroy(): void;
};

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

describe('kafkajs request queue fix', () => {
  beforeAll(() => expect(installIdleRequestQueueFix()).toBe(true));

  const queueOf = () => {
    const queue = new RequestQueue({
      maxInFlightRequests: 1,
      requestTimeout: 30_000,
      enforceRequestTimeout: false,
      clientId: 'spec',
      broker: 'b:9092',
      logger: silent,
    });
    const sent: number[] = [];
    let checks = 0;
    const check = queue.checkPendingRequests.bind(queue);
    queue.checkPendingRequests = () => {
      checks++;
      check();
    };
    const push = (correlationId: number) =>
      queue.push({
        entry: {
          correlationId,
          apiKey: 1,
          apiName: 'Fetch',
          apiVersion: 11,
          resolve: () => undefined,
          reject: () => undefined,
        },
        expectResponse: true,
        sendRequest: () => sent.push(correlationId),
      });
    const answer = (correlationId: number) =>
      queue.fulfillRequest({ correlationId, payload: Buffer.alloc(0), size: 0 });
    return { queue, sent, push, answer, checks: () => checks };
  };

  it('does not poll itself once nothing waits (kafkajs 2.2.4 re-armed a 1 ms timer for as long as the connection lived)', async () => {
    const { queue, push, answer, checks } = queueOf();
    try {
      push(1);
      answer(1);
      const after = checks();
      // Long enough for dozens of 1 ms re-arms; the count is read after it, not raced.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(checks() - after).toBe(0);
    } finally {
      queue.destroy();
    }
  });

  it('still sends a request queued behind the in-flight limit when the one ahead is answered', () => {
    const { queue, sent, push, answer } = queueOf();
    try {
      push(1);
      push(2);
      expect(sent).toEqual([1]);
      answer(1);
      expect(sent).toEqual([1, 2]);
    } finally {
      queue.destroy();
    }
  });

  it('still sends a request queued behind a broker throttle when the throttle ends, not before', async () => {
    const { queue, sent, push } = queueOf();
    try {
      const until = Date.now() + 50;
      queue.throttledUntil = until;
      push(1);
      expect(sent).toEqual([]);
      await waitFor('the queued request to be sent', () => sent.length === 1, { timeoutMs: 2000, intervalMs: 5 });
      expect(Date.now()).toBeGreaterThanOrEqual(until);
    } finally {
      queue.destroy();
    }
  });
});
