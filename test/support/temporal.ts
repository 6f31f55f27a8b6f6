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
