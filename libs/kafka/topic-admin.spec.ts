import { KafkaJSProtocolError } from 'kafkajs';
import type { Admin, Kafka } from 'kafkajs';
import { loadConfig } from '@libs/config';
import { TopicAdmin } from './topic-admin';

/**
 * Right after a topic is created (or a broker restarts), its partitions may have no leader yet: a ListOffsets on
 * them fails with NOT_LEADER_FOR_PARTITION (seen in CI: an agent's registration answered 500), while the cluster's
 * metadata already lists them. The admin here answers as the real one did then.
 */
describe('TopicAdmin', () => {
  const leaderless = () =>
    Promise.reject(new KafkaJSProtocolError('This server is not the leader for that topic-partition'));
  const admin = {
    createTopics: jest.fn(async () => true),
    fetchTopicOffsets: jest.fn(leaderless),
    fetchTopicMetadata: jest.fn(async ({ topics }: { topics: string[] }) => ({
      topics: topics.map((name) => ({
        name,
        partitions: [2, 0, 1].map((partitionId) => ({
          partitionId,
          leader: -1,
          partitionErrorCode: 5,
          replicas: [1],
          isr: [] as number[],
        })),
      })),
    })),
  };
  const kafka = { admin: () => admin as unknown as Admin } as unknown as Kafka;

  it('knows a topic by its partitions even before they have leaders', async () => {
    const topics = new TopicAdmin(kafka, loadConfig({}).kafka);
    await expect(topics.partitionsOf('a2a.t.agent.requests')).resolves.toEqual([0, 1, 2]);
    expect(admin.fetchTopicMetadata).toHaveBeenCalledTimes(1);
    expect(admin.fetchTopicOffsets).not.toHaveBeenCalled();
  });

  it('creates a topic and answers once its partitions have leaders', async () => {
    admin.fetchTopicMetadata.mockClear();
    // Leaderless on the first read, led on the next (createTopicsAndWait waits), then as the cluster has it.
    admin.fetchTopicMetadata.mockImplementationOnce(async ({ topics }: { topics: string[] }) => ({
      topics: topics.map((name) => ({
        name,
        partitions: [0, 1].map((partitionId) => ({
          partitionId,
          leader: -1,
          partitionErrorCode: 5,
          replicas: [1],
          isr: [] as number[],
        })),
      })),
    }));
    admin.fetchTopicMetadata.mockImplementation(async ({ topics }: { topics: string[] }) => ({
      topics: topics.map((name) => ({
        name,
        partitions: [1, 0].map((partitionId) => ({
          partitionId,
          leader: 1,
          partitionErrorCode: 0,
          replicas: [1],
          isr: [1],
        })),
      })),
    }));
    // Led, the partitions' offsets can be read (createTopicsAndWait reads them before answering).
    admin.fetchTopicOffsets.mockImplementationOnce(async () => [] as never);
    const topics = new TopicAdmin(kafka, loadConfig({}).kafka);
    await expect(topics.ensureTopic('a2a.t.agent.requests')).resolves.toEqual({ created: true });
    expect(admin.fetchTopicMetadata).toHaveBeenCalledTimes(3);
    await expect(topics.partitionsOf('a2a.t.agent.requests')).resolves.toEqual([0, 1]);
  });

  it('refuses a topic the metadata lists no partition of, and caches nothing for it', async () => {
    admin.fetchTopicMetadata.mockResolvedValueOnce({ topics: [] });
    const topics = new TopicAdmin(kafka, loadConfig({}).kafka);
    await expect(topics.partitionsOf('gone')).rejects.toThrow('lists no partition of topic gone');
    expect(topics.knownPartitionsOf('gone')).toBeUndefined();
  });
});
