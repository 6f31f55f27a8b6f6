import type { Kafka, Producer, RecordMetadata } from 'kafkajs';
import { frameFromStructured } from '@libs/frame';
import { EventProducer, ProducerOptions } from './event-producer';
import type { TopicAdmin } from './topic-admin';

const OPTIONS: ProducerOptions = {
  lingerMs: 0,
  maxBatchEvents: 10,
  maxInFlight: 1,
  maxHeldEvents: 100,
  maxHeldBytes: 1 << 20,
  publishTimeoutMs: 50,
  ackTimeoutMs: 1000,
  retryAfterSeconds: 1,
};

/** A producer whose produce requests the test answers (`ack`), over a fake kafkajs client; records the calls. */
function producerWithHeldAcks() {
  const calls: string[] = [];
  let ack: (() => void) | undefined;
  const fake = {
    connect: async () => undefined,
    disconnect: async () => void calls.push('disconnect'),
    sendBatch: () =>
      new Promise<RecordMetadata[]>((resolve) => {
        calls.push('sendBatch');
        ack = () => {
          calls.push('acked');
          resolve([{ topicName: 't', partition: 0, errorCode: 0, baseOffset: '0' }]);
        };
      }),
  } as unknown as Producer;
  const kafka = { producer: () => fake } as unknown as Kafka;
  const topics = { knownPartitionsOf: () => [0], partitionsOf: async () => [0] } as unknown as TopicAdmin;
  return { producer: new EventProducer(kafka, topics, OPTIONS), calls, ack: () => ack?.() };
}

const frame = () => frameFromStructured({ specversion: '1.0', id: 'e-1', source: '/s', type: 't.t', data: {} });

describe('EventProducer.disconnect', () => {
  it('waits for the produce request in flight (its publisher answered at its deadline) before it disconnects', async () => {
    const { producer, calls, ack } = producerWithHeldAcks();
    await expect(producer.publish('t', frame())).rejects.toMatchObject({ code: 'KAFKA_UNAVAILABLE' });
    expect(calls).toEqual(['sendBatch']);
    const closed = producer.disconnect();
    await new Promise((r) => setImmediate(r));
    expect(calls).toEqual(['sendBatch']);
    ack();
    await closed;
    expect(calls).toEqual(['sendBatch', 'acked', 'disconnect']);
  });

  it('disconnects at once when nothing is in flight', async () => {
    const { producer, calls } = producerWithHeldAcks();
    await producer.disconnect();
    expect(calls).toEqual(['disconnect']);
  });
});
