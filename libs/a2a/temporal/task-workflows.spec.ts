import type { Client } from '@temporalio/client';
import { TaskSettlements } from '../tasks/task-settlements';
import type { StoredTask } from '../tasks/task-store';
import { TaskWorkflows } from './task-workflows';

/** A blocking send's wait: this process's worker's news first, the workflow's result long-polled only past a grace. */
describe('TaskWorkflows.waitSettled', () => {
  function withWorker() {
    const result = jest.fn(() => new Promise<never>(() => undefined));
    const client = {
      connection: { withAbortSignal: (_: AbortSignal, fn: () => Promise<unknown>) => fn() },
      workflow: { getHandle: () => ({ result }) },
    } as unknown as Client;
    const settlements = new TaskSettlements();
    const workflows = new TaskWorkflows(client, {
      timeoutMs: 10_000,
      callTimeoutMs: 1000,
      worker: { client, settlements, running: () => true },
    });
    return { workflows, settlements, result };
  }

  it("answers on the worker's news without long-polling the workflow", async () => {
    const { workflows, settlements, result } = withWorker();
    const waiting = workflows.waitSettled('t', 10_000, { orSettledHere: true });
    setTimeout(() => settlements.settled({ id: 't', state: 'completed' } as StoredTask), 20);
    await waiting;
    expect(result).not.toHaveBeenCalled();
  });

  it('long-polls the workflow for a task not settled here within the grace, and ends at the bound', async () => {
    const { workflows, result } = withWorker();
    const started = Date.now();
    await workflows.waitSettled('t', 1500, { orSettledHere: true });
    expect(result).toHaveBeenCalledTimes(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
  });
});
