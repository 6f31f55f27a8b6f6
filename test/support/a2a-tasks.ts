import type { DataSource } from 'typeorm';
import { temporalClient } from './temporal';

/** Ends the task workflows of the tenants a test used that still run (parked tasks wait out their timeout otherwise). */
export async function endTaskWorkflows(tenants: string[]): Promise<void> {
  const { client, close } = await temporalClient();
  try {
    const query = `WorkflowType IN ('a2aTaskWorkflow', 'a2aTaskWorkflowV2') AND ExecutionStatus = 'Running' AND EventMeshTenant IN (${tenants.map((t) => `'${t}'`).join(', ')})`;
    for await (const run of client.workflow.list({ query })) {
      await client.workflow
        .getHandle(run.workflowId)
        .terminate('test finished')
        .catch(() => undefined);
    }
  } finally {
    await close();
  }
}

/** How many tasks the tenant has in Postgres (a request refused must leave it unchanged). */
export async function taskCountOf(db: DataSource, tenant: string): Promise<number> {
  const rows = (await db.query(`SELECT count(*)::int AS n FROM a2a_tasks WHERE tenant = $1`, [tenant])) as {
    n: number;
  }[];
  return rows[0].n;
}
