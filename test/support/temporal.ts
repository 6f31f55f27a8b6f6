import { Client, Connection } from '@temporalio/client';
import { Client as PgClient } from 'pg';
import { endOwnershipWorkflows } from '@libs/ownership';
import { dispatchWorkflowIdOf } from '@libs/temporal';
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
    workflowIds.map((id) =>
      client.workflow
        .getHandle(id)
        .terminate('test finished')
        .catch(() => undefined),
    ),
  );
}

/**
 * A clean start for PARTITION_OWNED_PULL: ends every ownership workflow of the test namespace (no members, no
 * assignment), and disables the subscriptions other suites left on A2A agents' and tenants' topics, whose partitions every
 * owned-mode instance would otherwise own beside the suite's own topic (docs/a2a.md).
 */
export async function resetOwnership(client: Client): Promise<void> {
  await endOwnershipWorkflows(client, 'test reset');
  const pg = testConfig().postgres;
  const db = new PgClient({
    host: pg.host,
    port: pg.port,
    user: pg.user,
    password: pg.password,
    database: pg.database,
  });
  await db.connect();
  try {
    await db.query(
      `UPDATE subscriptions SET status = 'DISABLED', updated_at = now()
        WHERE status = 'ACTIVE' AND (topic LIKE 'a2a.%' OR topic LIKE 'tenant.%')`,
    );
  } finally {
    await db.end();
  }
}

/** Terminates an instance's dispatch workflow, which outlives the instance a test closed. */
export async function terminateDispatch(instanceId: string): Promise<void> {
  const temporal = await temporalClient();
  try {
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId)]);
  } finally {
    await temporal.close();
  }
}
