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

  describe("polling: the owner's run started and claimed the lease under its epoch", () => {
    const key = 'orders#0';
    /** The coordinator assigns orders#0 to i1; its partition workflow reports `status`; Postgres holds `lease`. */
    const viewWith = async (status: { epoch: number; polling: boolean }, lease?: { owner: string; epoch: number }) => {
      const client = {
        workflow: {
          getHandle: (id: string) => ({
            query: () =>
              Promise.resolve(
                id === 'eventmesh-coordinator'
                  ? { members: ['i1'], drained: [], pins: {}, owners: { [key]: 'i1' }, generation: 1 }
                  : { topic: 'orders', partition: 0, owner: 'i1', delivered: 0, ownerChanges: 0, ...status },
              ),
          }),
        },
      } as unknown as Client;
      const rows = lease ? [{ topic: 'orders', partition: 0, renewedAt: null, rejectedWrites: 0, ...lease }] : [];
      const view = await new OwnershipAdmin(client, {
        list: () => Promise.resolve(rows),
      } as unknown as LeaseStore).partitions();
      return view.partitions[0];
    };

    it.each([
      ["claimed by the owner under the run's epoch", true, { epoch: 3, polling: true }, { owner: 'i1', epoch: 3 }],
      [
        'scheduled, nothing claimed yet (the instance at its most partitions)',
        false,
        { epoch: 3, polling: true },
        undefined,
      ],
      ["the lease still the previous owner's", false, { epoch: 3, polling: true }, { owner: 'i0', epoch: 2 }],
      ["the lease the owner's earlier run's", false, { epoch: 3, polling: true }, { owner: 'i1', epoch: 2 }],
      ['no run scheduled', false, { epoch: 3, polling: false }, { owner: 'i1', epoch: 3 }],
    ])('%s: polling %s', async (_, polling, status, lease) => {
      expect(await viewWith(status, lease)).toMatchObject({ owner: 'i1', epoch: 3, polling });
    });
  });
});
