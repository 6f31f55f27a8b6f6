import type { SkippedRangeStore } from '@libs/storage';
import { skippedEventsFinding } from './skipped-events';

const at = new Date('2026-12-01T09:00:00Z');
const store = {
  recordedSince: () =>
    Promise.resolve({
      subscriptions: 1,
      events: 5,
      latest: [{ subscriptionId: 'a1b2', events: 5, ranges: 1, since: at, latest: at }],
    }),
} as unknown as SkippedRangeStore;

describe('skippedEventsFinding', () => {
  it('lists the subscriptions while the gates are open', async () => {
    const { warnings } = await skippedEventsFinding(store, 60000).read();
    expect(warnings[0]).toMatchObject({
      code: 'EVENTS_SKIPPED',
      events: 5,
      subscriptionCount: 1,
      subscriptions: [{ id: 'a1b2' }],
    });
  });

  it('gives the totals only when a gate tells tenants apart (/health is public)', async () => {
    const { warnings } = await skippedEventsFinding(store, 60000, false).read();
    expect(warnings[0]).toMatchObject({ code: 'EVENTS_SKIPPED', events: 5, subscriptionCount: 1 });
    expect(JSON.stringify(warnings)).not.toContain('a1b2');
  });
});
