import { Client, Connection, WorkflowClientInterceptor } from '@temporalio/client';
import type { EventMeshConfig } from '@libs/config';

export interface TemporalHandle {
  connection: Connection;
  client: Client;
}

/**
 * Connects to the Temporal frontend and checks the namespace exists; fails within the configured deadline.
 * `interceptors`: the client's workflow interceptors (tracing, when on: libs/tracing/temporal-tracing.ts).
 */
export async function connectTemporal(
  config: EventMeshConfig['temporal'],
  interceptors: WorkflowClientInterceptor[] = [],
): Promise<TemporalHandle> {
  const connection = await Connection.connect({
    address: config.address,
    connectTimeout: config.connectTimeoutMs,
  });
  try {
    await connection.withDeadline(Date.now() + config.connectTimeoutMs, () =>
      connection.workflowService.describeNamespace({ namespace: config.namespace }),
    );
  } catch (e) {
    await connection.close();
    throw e;
  }
  return {
    connection,
    client: new Client({ connection, namespace: config.namespace, interceptors: { workflow: interceptors } }),
  };
}

/** Cheap liveness probe for /health. */
export async function pingTemporal(handle: TemporalHandle, timeoutMs: number): Promise<void> {
  await handle.connection.withDeadline(Date.now() + timeoutMs, () => handle.connection.healthService.check({}));
}
