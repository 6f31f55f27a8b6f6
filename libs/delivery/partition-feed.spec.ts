import type { FetchedPartition } from '@libs/kafka';
import type { SubscriptionEntity } from '@libs/storage';
import type { DispatchContext } from './dispatch-context';
import { Lanes, newLane } from './lane';
import { MIN_FETCH_BYTES, PartitionFeed } from './partition-feed';

/** What a fetch asks of each partition: no more records than its lanes have room for (kafkajs decodes them all). */
describe('PartitionFeed fetch size', () => {
  const BATCH_MAX_EVENTS = 500;
  const VALUE_BYTES = 1000;

  const setup = () => {
    const lanes = new Lanes();
    const ctx = {
      deps: { options: { batchMaxEvents: BATCH_MAX_EVENTS } },
      lanes,
      breakers: { of: () => ({ admitting: true }) },
      progress: {},
    } as unknown as DispatchContext;
    const subscription = { id: 's', topic: 'orders', config: {} } as unknown as SubscriptionEntity;
    const lane = newLane(subscription, { filters: [], matches: () => true }, 0, 0);
    lanes.add(lane);
    return { feed: new PartitionFeed(ctx), lane };
  };
  const fetched = (from: number, count: number, valueBytes = VALUE_BYTES): FetchedPartition => ({
    topic: 'orders',
    partition: 0,
    fetchOffset: from,
    highWatermark: from + count,
    records: Array.from({ length: count }, (_, i) => ({
      offset: from + i,
      key: null,
      value: Buffer.alloc(valueBytes, 'x'),
      headers: { ce_specversion: '1.0', ce_id: `e-${from + i}`, ce_source: '/s', ce_type: 't' },
      timestamp: 0,
    })),
  });

  it('asks for the records up to where the lane is full, at the bytes per record last seen', async () => {
    const { feed, lane } = setup();
    // Nothing seen yet: the reader's default.
    expect(feed.wanted()).toEqual([{ topic: 'orders', partition: 0, offset: 0 }]);
    await feed.accept([fetched(0, 300)]);
    expect(lane.buffer).toHaveLength(300);
    // The lane delivered 100: it has room for 300 records after the 200 it holds.
    lane.buffer.splice(0, 100);
    const [position] = feed.wanted();
    expect(position.offset).toBe(300);
    expect(position.maxBytes).toBeGreaterThanOrEqual(300 * VALUE_BYTES);
    expect(position.maxBytes).toBeLessThan(300 * (VALUE_BYTES + 200));
  });

  it('asks for at least MIN_FETCH_BYTES, so a record batch of the producer still fits whole', async () => {
    const { feed, lane } = setup();
    // Records of 10 bytes: room for 400 of them is far below the floor.
    await feed.accept([fetched(0, 300, 10)]);
    lane.buffer.splice(0, 200);
    expect(feed.wanted()[0]).toEqual({ topic: 'orders', partition: 0, offset: 300, maxBytes: MIN_FETCH_BYTES });
  });

  it('asks for the reader default again after a fetch in which no record fitted', async () => {
    const { feed, lane } = setup();
    await feed.accept([fetched(0, 100)]);
    lane.buffer = [];
    lane.nextOffset = 100;
    expect(feed.wanted()[0].maxBytes).toBeDefined();
    // The log holds records from 100 on, but none came: the record batch there is larger than asked.
    await feed.accept([{ ...fetched(100, 0), highWatermark: 400 }]);
    expect(feed.wanted()).toEqual([{ topic: 'orders', partition: 0, offset: 100 }]);
  });
});
