import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import type { MeshTaskHandler } from '../../../libs/a2a';
import { withoutInternalDetail } from './a2a-rest-v03';

/** What the SDK's v0.3 router gets of the mesh's handler: the runtime's failures without their detail. */
describe('withoutInternalDetail', () => {
  const outage = new Error('connect ECONNREFUSED 127.0.0.1:5432');
  async function* failing(): AsyncGenerator<number> {
    yield 1;
    throw outage;
  }
  const fake = {
    getTask: () => Promise.reject(outage),
    cancelTask: () => Promise.reject(new TaskNotFoundError('task t not found')),
    resubscribe: () => failing(),
    getAgentCard: () => Promise.resolve({ name: 'echo' }),
  } as unknown as MeshTaskHandler;
  const handler = withoutInternalDetail(fake) as unknown as Record<string, (...a: unknown[]) => unknown>;

  it('answers a failure of the runtime as an internal error, without its message', async () => {
    await expect(handler.getTask()).rejects.toThrow(/^internal error$/);
  });

  it('passes the protocol\'s errors and the answers as they are', async () => {
    await expect(handler.cancelTask()).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(handler.getAgentCard()).resolves.toEqual({ name: 'echo' });
  });

  it('hides a stream\'s failure midway, after the events before it', async () => {
    const seen: number[] = [];
    await expect((async () => {
      for await (const n of handler.resubscribe() as AsyncGenerator<number>) seen.push(n);
    })()).rejects.toThrow(/^internal error$/);
    expect(seen).toEqual([1]);
  });
});
