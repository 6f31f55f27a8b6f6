import { Client, Connection } from '@temporalio/client';
import { endOwnershipWorkflows } from '../../libs/ownership';
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

/** Ends every ownership workflow of the test namespace, so a test starts from no members and no assignment. */
export async function resetOwnership(client: Client): Promise<void> {
  await endOwnershipWorkflows(client, 'test reset');
}
