import { randomUUID } from 'node:crypto';
import { SendMessageRequest, Task, TaskState } from '@a2a-js/sdk';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { requestTopicOf } from '@libs/a2a';
import type { PartitionsView } from '@libs/ownership';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { EchoAgent } from '../support/a2a-echo-agent';
import { endTaskWorkflows } from '../support/a2a-tasks';
import { testConfig, uniqueTopic } from '../support/env';
import { callAs, headerTenantGate, stockClientOf } from '../support/header-tenant-gate';
import { resetOwnership, temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * A mesh-subscriber agent in PARTITION_OWNED_PULL (docs/a2a.md): once a subscription reads its request topic, the
 * instances announce that topic's partitions to the coordinator beside the configured topics', an owner's loop
 * delivers them, and the agent's replica long-polls its tasks as in LOCAL_STICKY_PULL. Real Postgres, Kafka and
 * Temporal; one instance (gateway and worker), lease TTL 4 s (an announcement every 4 s).
 */
describe('A2A subscriber agents in PARTITION_OWNED_PULL (real servers)', () => {
  const suffix = randomUUID().slice(0, 8);
  const tenant = `a2a-o-${suffix}`;
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `a2a-o-${suffix}`,
    EVENTMESH_KAFKA_TOPICS: uniqueTopic('a2a-o'),
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '2',
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_DELIVERY_TOPOLOGY: 'PARTITION_OWNED_PULL',
    EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000',
    EVENTMESH_AGENTS_TASK_TIMEOUT_MS: '60000',
  });
  const gate = (name: string) => headerTenantGate(name);
  let instance: RunningInstance;

  beforeAll(async () => {
    const temporal = await temporalClient();
    await resetOwnership(temporal.client);
    await temporal.close();
    instance = await startInstance(config, {
      roles: ['gateway', 'worker'],
      gates: { ingress: gate('ingress'), admin: gate('admin'), close: async () => undefined },
    });
  });
  afterAll(async () => {
    await endTaskWorkflows([tenant]);
    await instance?.close();
    const temporal = await temporalClient();
    await resetOwnership(temporal.client);
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(config.instance.id)]);
    await temporal.close();
  });

  const call = (method: string, path: string, body?: unknown) => callAs(tenant, instance.url!, method, path, body);

  it("owns the request topic's partitions once a subscription reads it, and the replica pulls its task and completes it", async () => {
    const card = { ...new EchoAgent().card(), name: 'puller', supportedInterfaces: [] };
    expect((await call('PUT', '/a2a/agents/puller?style=subscriber', card)).status).toBe(201);
    const topic = requestTopicOf(tenant, 'puller');
    const owned = async () =>
      ((await call('GET', '/admin/partitions')).body as unknown as PartitionsView).partitions.filter(
        (p) => p.topic === topic,
      );
    // Nobody reads the topic yet: its partitions are not owned.
    expect(await owned()).toEqual([]);

    const subscription = await call('POST', '/subscriptions', {
      protocol: 'STREAM',
      topic,
      config: { policy: 'LOAD_BALANCE', startFrom: 'earliest' },
    });
    expect(subscription.status).toBe(201);
    const id = subscription.body!.id as string;
    const client = await stockClientOf(`${instance.url}/a2a/agents/puller/.well-known/agent-card.json`, tenant);
    const task = (await client.sendMessage(
      SendMessageRequest.fromJSON({
        message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'job' }] },
        configuration: { returnImmediately: true },
      }),
    )) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);

    // The instance announces the topic's partitions at its next round; the coordinator assigns them; the owner polls.
    const partitions = await waitFor(
      "the request topic's partitions owned and polled",
      async () => {
        const now = await owned();
        return now.length === 2 && now.every((p) => p.owner === config.instance.id && p.polling) && now;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(partitions.map((p) => p.partition).sort()).toEqual([0, 1]);

    const delivery = await waitFor(
      'the task at the replica',
      async () => {
        const polled = await call('GET', `/subscriptions/${id}/poll?consumer=r1&window=1&max=1&waitMs=500`);
        return (
          (polled.body?.deliveries ?? []) as { deliveryId: string; event: { type: string; a2ataskid: string } }[]
        )[0];
      },
      { timeoutMs: 30_000 },
    );
    expect(delivery.event).toMatchObject({ type: 'a2a.task.send', a2ataskid: task.id });
    expect(
      await call('POST', `/a2a/agents/puller/tasks/${task.id}/updates`, {
        state: 'TASK_STATE_COMPLETED',
        message: { messageId: randomUUID(), role: 'ROLE_AGENT', parts: [{ text: 'done' }] },
      }),
    ).toMatchObject({ status: 200, body: { state: 'completed' } });
    expect(
      (await call('POST', `/subscriptions/${id}/acks`, { deliveryId: delivery.deliveryId, action: 'ack' })).status,
    ).toBe(200);
    expect((await client.getTask({ tenant: '', id: task.id, historyLength: undefined })).status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
  });
});
