import { frameFromKafkaRecord, type EventFrame } from '@libs/frame';
import type { PartitionReader } from '@libs/kafka';
import type { TaskRequestRecord } from '../../../contracts';
import type { RequestHandoff } from './request-handoff';
import type { RequestRecords } from './task-relay';

/** The record of a task's request is no longer in Kafka (past the topic's retention): the task cannot be delivered. */
export class RequestRecordGone extends Error {}

/**
 * Reads the record of a task's request back from its agent's request topic, by partition and offset; or takes it
 * from the gateway of this process, which handed it off as it wrote it (request-handoff.ts).
 */
export class KafkaRequestRecords implements RequestRecords {
  constructor(
    private readonly reader: PartitionReader,
    private readonly handoff?: RequestHandoff,
  ) {}

  async read(record: TaskRequestRecord): Promise<EventFrame> {
    const handed = this.handoff?.take(record);
    if (handed) return handed;
    const [fetched] = await this.reader.fetch([record], { maxWaitMs: 0 });
    if (fetched?.outOfRange)
      throw new RequestRecordGone(
        `the request of the task at ${record.topic}#${record.partition}@${record.offset} is no longer in Kafka`,
      );
    const found = fetched?.records.find((r) => r.offset === record.offset);
    if (!found)
      throw new Error(
        `the request of the task at ${record.topic}#${record.partition}@${record.offset} was not read (high watermark ${fetched?.highWatermark ?? 'unknown'})`,
      );
    return frameFromKafkaRecord(found.headers, found.value);
  }
}
