import { KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import type { Admin } from 'kafkajs';
import { createTopicsAndWait } from './topic-creation';

/**
 * A KRaft broker asked for the metadata of a topic it has just created may answer UNKNOWN_TOPIC_OR_PARTITION until
 * its metadata cache applied the topic (seen: `npm run bench:a2a` on a broker just started stopped there, thrown by
 * kafkajs's `createTopics` with `waitForLeaders`). The admin here answers as that broker did.
 */
describe('createTopicsAndWait', () => {
  const protocolError = (type: string, message: string) => Object.assign(new KafkaJSProtocolError(message), { type });
  const unknownTopic = () =>
    protocolError('UNKNOWN_TOPIC_OR_PARTITION', 'This server does not host this topic-partition');
  const partitionsOf = (name: string, leader: number) => ({
    name,
    partitions: [0, 1].map((partitionId) => ({
      partitionId,
      leader,
      partitionErrorCode: leader < 0 ? 5 : 0,
      replicas: [1],
      isr: leader < 0 ? [] : [1],
    })),
  });

  function adminAnswering(...answers: Array<() => unknown>) {
    const fetchTopicMetadata = jest.fn(async () => {
      const next = answers.length > 1 ? answers.shift()! : answers[0];
      return next();
    });
    const fetchTopicOffsets = jest.fn(async () => [{ partition: 0, offset: '0', high: '0', low: '0' }]);
    return { createTopics: jest.fn(async () => true), fetchTopicMetadata, fetchTopicOffsets } as unknown as Admin & {
      fetchTopicMetadata: jest.Mock;
      fetchTopicOffsets: jest.Mock;
      createTopics: jest.Mock;
    };
  }

  it('waits through an unknown topic and leaderless partitions until every partition has a leader', async () => {
    const admin = adminAnswering(
      () => Promise.reject(unknownTopic()),
      () => Promise.reject(new KafkaJSNumberOfRetriesExceeded(unknownTopic(), { retryCount: 2, retryTime: 300 })),
      () => ({ topics: [partitionsOf('t', -1)] }),
      () => ({ topics: [partitionsOf('t', 1)] }),
    );
    await expect(createTopicsAndWait(admin, [{ topic: 't', numPartitions: 2 }], { pollMs: 1 })).resolves.toBe(true);
    expect(admin.fetchTopicMetadata).toHaveBeenCalledTimes(4);
    expect(admin.createTopics).toHaveBeenCalledWith({
      waitForLeaders: false,
      topics: [{ topic: 't', numPartitions: 2 }],
    });
  });

  it('waits until the offsets can be read, through a broker not yet leading what the metadata says it leads', async () => {
    const admin = adminAnswering(() => ({ topics: [partitionsOf('t', 1)] }));
    admin.fetchTopicOffsets.mockRejectedValueOnce(
      protocolError('NOT_LEADER_FOR_PARTITION', 'This server is not the leader for that topic-partition'),
    );
    await expect(createTopicsAndWait(admin, [{ topic: 't' }], { pollMs: 1 })).resolves.toBe(true);
    expect(admin.fetchTopicOffsets).toHaveBeenCalledTimes(2);
  });

  it('gives up at its deadline, naming what it waited for', async () => {
    const admin = adminAnswering(() => Promise.reject(unknownTopic()));
    await expect(createTopicsAndWait(admin, [{ topic: 't' }], { timeoutMs: 30, pollMs: 5 })).rejects.toThrow(
      "created topics t, but waited 30 ms for the broker's metadata (UNKNOWN_TOPIC_OR_PARTITION)",
    );
  });

  it('passes on an error that does not mean "not yet"', async () => {
    const admin = adminAnswering(() =>
      Promise.reject(protocolError('TOPIC_AUTHORIZATION_FAILED', 'Not authorized to access topics')),
    );
    await expect(createTopicsAndWait(admin, [{ topic: 't' }], { pollMs: 1 })).rejects.toThrow('Not authorized');
    expect(admin.fetchTopicMetadata).toHaveBeenCalledTimes(1);
  });
});
