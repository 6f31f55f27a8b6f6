import type { Admin, ITopicConfig } from 'kafkajs';

/** Errors a broker answers for a topic it was just asked to create, until its metadata and leaders have caught up. */
const NOT_YET = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE', 'NOT_LEADER_FOR_PARTITION']);

export interface TopicCreationOptions {
  /** How long the topics may take to have a leader for every partition. */
  timeoutMs?: number;
  /** How often the metadata is read meanwhile. */
  pollMs?: number;
}

/**
 * Creates the topics that do not exist yet, then waits until the cluster's metadata lists every partition of each
 * with a leader and their offsets can be read; resolves whether it created any (as `createTopics` does). kafkajs's own `waitForLeaders` tries the
 * metadata again only on LEADER_NOT_AVAILABLE, while a KRaft broker answers UNKNOWN_TOPIC_OR_PARTITION for a topic
 * its metadata cache has not applied yet: kafkajs then throws at once although the topic is being created (seen
 * with a broker just started); and a broker may answer NOT_LEADER_FOR_PARTITION to a ListOffsets for a partition
 * the metadata already shows it leading. Here these mean "not yet", up to `timeoutMs`.
 */
export async function createTopicsAndWait(
  admin: Admin,
  topics: ITopicConfig[],
  options: TopicCreationOptions = {},
): Promise<boolean> {
  const { timeoutMs = 10_000, pollMs = 100 } = options;
  const created = await admin.createTopics({ waitForLeaders: false, topics });
  const names = topics.map((t) => t.topic);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let waitingFor = "the broker's metadata";
    try {
      const metadata = await admin.fetchTopicMetadata({ topics: names });
      const lacking = names.find((name) => {
        const partitions = metadata.topics.find((t) => t.name === name)?.partitions ?? [];
        return partitions.length === 0 || partitions.some((p) => p.leader < 0 || p.partitionErrorCode !== 0);
      });
      if (lacking === undefined) {
        // Listed with leaders is not yet served: a ListOffsets can still be answered NOT_LEADER_FOR_PARTITION by a
        // broker that has not taken the leadership it was given (seen: a subscription created right after an
        // agent's registration answered 503). Readable offsets are what the runtime does next with a new topic.
        waitingFor = `the offsets of every partition`;
        for (const name of names) await admin.fetchTopicOffsets(name);
        return created;
      }
      waitingFor = `a leader for every partition of ${lacking}`;
    } catch (e) {
      const type = errorTypeOf(e);
      if (!type || !NOT_YET.has(type)) throw e;
      waitingFor = `${waitingFor} (${type})`;
    }
    if (Date.now() + pollMs > deadline)
      throw new Error(`created topics ${names.join(', ')}, but waited ${timeoutMs} ms for ${waitingFor}`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/** A kafkajs protocol error's type, also when kafkajs wrapped it after its retries. */
function errorTypeOf(e: unknown): string | undefined {
  for (
    let error = e as { type?: string; cause?: unknown } | undefined, depth = 0;
    error && depth < 4;
    error = error.cause as typeof error, depth++
  ) {
    if (typeof error.type === 'string') return error.type;
  }
  return undefined;
}
