import { orderingOf } from '@libs/delivery/ordering';
import type { SubscriptionEntity } from '@libs/storage';
import { createSubscriptionSchema } from './subscription.schema';

/** `config.ordering` and `config.concurrency` of a subscription: what the schema takes and refuses. */
describe('subscription ordering', () => {
  const http = (config: Record<string, unknown>) => ({ sink: 'http://127.0.0.1:9/x', config });
  const refusal = (body: unknown) => {
    const parsed = createSubscriptionSchema.safeParse(body);
    return parsed.success ? undefined : `${parsed.error.issues[0].path.join('.')}: ${parsed.error.issues[0].message}`;
  };

  it('takes each ordering, and concurrency with key or none', () => {
    for (const ordering of ['partition', 'key', 'none']) expect(refusal(http({ ordering }))).toBeUndefined();
    expect(refusal(http({ ordering: 'key', concurrency: 64 }))).toBeUndefined();
    expect(refusal(http({ ordering: 'none', concurrency: 1 }))).toBeUndefined();
  });

  it('refuses an unknown ordering, a concurrency out of range or without key/none, and either on a STREAM subscription', () => {
    expect(refusal(http({ ordering: 'fifo' }))).toBe(
      'config.ordering: Invalid option: expected one of "partition"|"key"|"none"',
    );
    expect(refusal(http({ ordering: 'key', concurrency: 0 }))).toMatch(/^config\.concurrency: /);
    expect(refusal(http({ ordering: 'key', concurrency: 257 }))).toMatch(/^config\.concurrency: /);
    expect(refusal(http({ concurrency: 4 }))).toBe(
      'config.concurrency: concurrency applies to ordering key or none; ordering partition delivers one event at a time',
    );
    expect(refusal({ protocol: 'STREAM', config: { ordering: 'key' } })).toMatch(
      /^config\.ordering: ordering and concurrency apply to HTTP subscriptions/,
    );
  });

  it('defaults to partition for a webhook subscription', () => {
    expect(orderingOf({ protocol: 'HTTP', config: {} } as unknown as SubscriptionEntity)).toBe('partition');
    expect(orderingOf({ protocol: 'HTTP', config: { ordering: 'key' } } as unknown as SubscriptionEntity)).toBe('key');
  });
});
