import {
  KafkaJSConnectionError,
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSProtocolError,
  KafkaJSRequestTimeoutError,
} from 'kafkajs';
import { QueryFailedError } from 'typeorm';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { toHttpError } from './http-error';

describe('toHttpError', () => {
  it.each([
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['a connection dropped under a query', new Error('Connection terminated unexpectedly')],
    [
      'a server shutting down (57P01), wrapped by TypeORM',
      new QueryFailedError(
        'SELECT 1',
        [],
        Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      ),
    ],
    ['a server starting up (57P03)', Object.assign(new Error('the database system is starting up'), { code: '57P03' })],
    ['a connection exception (class 08)', Object.assign(new Error('connection failure'), { code: '08006' })],
  ])('answers Postgres unavailable (%s) with 503 DEPENDENCY_UNAVAILABLE and Retry-After, not 500', (_, error) => {
    expect(toHttpError(error)).toEqual({
      status: 503,
      body: {
        code: ErrorCode.DependencyUnavailable,
        message: 'Postgres is unavailable; try again',
        dependency: 'postgres',
      },
      headers: { 'retry-after': '1' },
    });
  });

  it.each([
    [
      'a refused connection (which carries ECONNREFUSED, as a Postgres one does)',
      new KafkaJSConnectionError('Connection error: connect ECONNREFUSED 127.0.0.1:9092', {
        broker: '127.0.0.1:9092',
        code: 'ECONNREFUSED',
      }),
    ],
    ['a request timed out', new KafkaJSRequestTimeoutError('Request Produce(key: 0, version: 7) timed out')],
    [
      'a partition without a leader yet',
      new KafkaJSProtocolError(
        Object.assign(new Error('This server is not the leader for that topic-partition'), {
          type: 'NOT_LEADER_FOR_PARTITION',
          code: 6,
          retriable: true,
        }),
      ),
    ],
    [
      'retries exhausted on a connection error',
      new KafkaJSNumberOfRetriesExceeded(new KafkaJSConnectionError('Connection error: read ECONNRESET'), {
        retryCount: 5,
        retryTime: 5000,
      }),
    ],
  ])('answers Kafka unavailable (%s) with 503 KAFKA_UNAVAILABLE and Retry-After, not 500 or Postgres', (_, error) => {
    expect(toHttpError(error)).toEqual({
      status: 503,
      body: { code: ErrorCode.KafkaUnavailable, message: 'Kafka is unavailable; try again', retryAfterSeconds: 1 },
      headers: { 'retry-after': '1' },
    });
  });

  it('keeps a request Kafka refuses for good (an authorization failure) a 500', () => {
    const error = new KafkaJSProtocolError(
      Object.assign(new Error('Not authorized to access topics'), {
        type: 'TOPIC_AUTHORIZATION_FAILED',
        code: 29,
        retriable: false,
      }),
    );
    expect(toHttpError(error)).toMatchObject({ status: 500, body: { code: ErrorCode.Internal } });
  });

  it('keeps a query error (a violated constraint) a 500: it is a bug, not an outage', () => {
    const error = new QueryFailedError(
      'INSERT',
      [],
      Object.assign(new Error('duplicate key value'), { code: '23505' }),
    );
    expect(toHttpError(error)).toMatchObject({ status: 500, body: { code: ErrorCode.Internal } });
  });

  it("maps the runtime's own errors by their code, with Retry-After when they name a wait", () => {
    expect(toHttpError(new EventMeshError(ErrorCode.Overloaded, 'busy', { retryAfterSeconds: 2 }))).toMatchObject({
      status: 503,
      headers: { 'retry-after': '2' },
    });
  });
});
