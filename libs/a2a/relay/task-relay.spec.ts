import type { TaskRequestRecord } from '../../../contracts';
import type { AgentClients } from './agent-clients';
import type { A2AAgentStore } from '../agents/agent-store';
import { TaskNotRecorded, TaskRelay } from './task-relay';
import type { A2ATaskStore, StoredTask } from '../tasks/task-store';

/**
 * Where a delivery finds the task and its request (stand-ins for Postgres and Kafka): a task whose row is not
 * written yet is tried again, never failed; a first turn's request is read where the row says.
 */
describe('TaskRelay deliver', () => {
  const ids = { taskId: 't1', tenant: 'acme', agent: 'echo' };
  const position: TaskRequestRecord = { topic: 'a2a.acme.echo.requests', partition: 0, offset: 41 };
  const relayWith = (task: Partial<StoredTask> | undefined) => {
    const read = jest.fn(async () => {
      throw new Error('read stops here');
    });
    const relay = new TaskRelay(
      {
        get: async () =>
          task && ({ id: 't1', state: 'submitted', deliveredTurn: 0, requestRecord: null, ...task } as StoredTask),
      } as unknown as A2ATaskStore,
      {
        get: async () => ({ tenant: 'acme', name: 'echo', style: 'url', updatedAt: new Date(0) }),
      } as unknown as A2AAgentStore,
      { clientFor: async () => ({}) } as unknown as AgentClients,
      { read },
      { publish: async () => undefined },
    );
    return { relay, read };
  };
  const ctx = { signal: new AbortController().signal, callTimeoutMs: 1000 };

  it('throws TaskNotRecorded (tried again by Temporal) for a task whose row is not there, instead of failing it', async () => {
    const { relay } = relayWith(undefined);
    await expect(relay.deliver(ids, undefined, ctx)).rejects.toBeInstanceOf(TaskNotRecorded);
  });

  it("reads a first turn's request where the task's row says when the workflow's input names none, and where the input says otherwise", async () => {
    const fromRow = relayWith({ requestRecord: position });
    await expect(fromRow.relay.deliver(ids, undefined, ctx)).rejects.toThrow('read stops here');
    expect(fromRow.read).toHaveBeenCalledWith(position);
    const fromInput = relayWith({ requestRecord: position });
    await expect(fromInput.relay.deliver(ids, { ...position, offset: 7 }, ctx)).rejects.toThrow('read stops here');
    expect(fromInput.read).toHaveBeenCalledWith({ ...position, offset: 7 });
    const nowhere = relayWith({});
    await expect(nowhere.relay.deliver(ids, undefined, ctx)).rejects.toThrow('names no request record');
  });
});
