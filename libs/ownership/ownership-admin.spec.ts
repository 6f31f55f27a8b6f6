import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { LeaseStore } from '@libs/storage';
import { OwnershipAdmin } from './ownership-admin';

/** A Temporal client whose coordinator query answers `query()`; the lease store holds nothing. */
const adminWith = (query: () => Promise<unknown>) => {
  const client = { workflow: { getHandle: () => ({ query }) } } as unknown as Client;
  return new OwnershipAdmin(client, { list: () => Promise.resolve([]) } as unknown as LeaseStore);
};

describe('OwnershipAdmin.partitions', () => {
  it('answers an empty assignment when no coordinator runs yet', async () => {
    const view = await adminWith(() =>
      Promise.reject(new WorkflowNotFoundError('not found', 'eventmesh-coordinator', undefined)),
    ).partitions();
    expect(view).toEqual({ members: [], drained: [], pins: {}, generation: 0, partitions: [] });
  });

  it('a coordinator query Temporal cannot answer is a retriable DEPENDENCY_UNAVAILABLE naming the cause, not an opaque error', async () => {
    const failure = await adminWith(() => Promise.reject(new Error('query timed out')))
      .partitions()
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(EventMeshError);
    expect(failure).toMatchObject({
      code: ErrorCode.DependencyUnavailable,
      retriable: true,
      details: { dependency: 'temporal', retryAfterSeconds: 1 },
    });
    expect((failure as Error).message).toBe(
      'the coordinator workflow did not answer the assignment query: query timed out; try again',
    );
  });
});
