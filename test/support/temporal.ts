import { Client, Connection } from '@temporalio/client';
import { testConfig } from './env';

/** A Temporal client for assertions and clean-up in tests. */
export async function temporalClient(): Promise<{ client: Client; close(): Promise<void> }> {
  const config = testConfig().temporal;
  const connection = await Connection.connect({ address: config.address });
  return { client: new Client({ connection, namespace: config.namespace }), close: () => connection.close() };
}

/** Ends workflows a test started, so the Temporal UI is not left with the runs of test instances. */
export async function terminateWorkflows(client: Client, workflowIds: string[]): Promise<void> {
  await Promise.all(
    workflowIds.map((id) => client.workflow.getHandle(id).terminate('test finished').catch(() => undefined)),
  );
}

/**
 * Ends every running workflow of PARTITION_OWNED_PULL in the test namespace (coordinator, partition and instance
 * leases), so a test starts from no members and no assignment.
 */
export async function resetOwnership(client: Client): Promise<void> {
  const query = `WorkflowType IN ('coordinatorWorkflow', 'partitionWorkflow', 'instanceLeaseWorkflow') AND ExecutionStatus = 'Running'`;
  const ids: string[] = [];
  for await (const w of client.workflow.list({ query })) ids.push(w.workflowId);
  await terminateWorkflows(client, ids);
}
