import { Kafka, logLevel as KafkaLogLevel, LogEntry } from 'kafkajs';
import type { EventMeshConfig } from '@libs/config';
import { createLogger } from '@libs/logging';
import { installIdleRequestQueueFix } from '@libs/kafkajs-patches';
import { socketFactoryDroppingSilentLinks } from './silent-links';

/**
 * One kafkajs client per process, logging through the structured logger. kafkajs's request queues stop polling
 * themselves while idle (kafkajs-request-queue.ts) from the first client on.
 */
export function createKafka(config: EventMeshConfig['kafka'], clientSuffix: string): Kafka {
  installIdleRequestQueueFix();
  const log = createLogger('kafkajs');
  return new Kafka({
    clientId: `${config.clientId}-${clientSuffix}`,
    brokers: config.brokers,
    connectionTimeout: config.connectTimeoutMs,
    // Each request to a broker is bounded (and enforced: kafkajs' enforceRequestTimeout, on by default).
    requestTimeout: config.requestTimeoutMs,
    // A connection that answers nothing for a request timeout (and a second more, so a broker's own answer at that
    // deadline, a produce's acknowledgement timeout, is not raced) after a request is dropped, not kept for the next.
    socketFactory: socketFactoryDroppingSilentLinks(config.requestTimeoutMs + 1000),
    retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 5000 },
    logLevel: KafkaLogLevel.WARN,
    logCreator:
      () =>
      ({ namespace, level, log: entry }: LogEntry) => {
        const { message, logger: _logger, timestamp: _timestamp, ...fields } = entry;
        const data = { namespace, ...fields };
        if (level === KafkaLogLevel.ERROR) log.error(data, message);
        else if (level === KafkaLogLevel.WARN) log.warn(data, message);
        else log.debug(data, message);
      },
  });
}
