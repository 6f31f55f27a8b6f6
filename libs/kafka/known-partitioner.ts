import { Partitioners, type ICustomPartitioner } from 'kafkajs';

/**
 * The producer's partitioner: the partition the publish path chose (from TopicAdmin's partition list) when the
 * producer's own metadata has it, else one the producer knows, written back on the message for its receipt.
 * kafkajs sends nothing for a partition missing from its metadata (it drops the message and the publish gets no
 * acknowledgement), and its producer re-reads metadata every 5 minutes only: a topic whose partitions grew
 * (`PATCH /topics/{name}`) would refuse publishes until then.
 */
export const knownPartitioner: ICustomPartitioner = () => {
  const fallback = Partitioners.DefaultPartitioner();
  return (args) => {
    const { message, partitionMetadata } = args;
    const chosen = message.partition;
    if (chosen === undefined || partitionMetadata.some((p) => p.partitionId === chosen)) return fallback(args);
    message.partition = undefined;
    message.partition = fallback(args);
    return message.partition;
  };
};
