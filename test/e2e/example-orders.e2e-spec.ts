import { spawn } from 'node:child_process';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { dispatchWorkflowIdOf } from '../../libs/temporal';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { deleteOrdersSubscriptions, exerciseOrdersApp, ordersAppUrl } from '../support/orders-app';
import { temporalClient, terminateWorkflows } from '../support/temporal';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The orders example as its README runs it: one command, `npm run example:orders`, from the repository's root,
 * against a running instance (it builds both packages and the example, then starts the app). The app's
 * controller publishes, its handler receives, its responder answers; SIGTERM to the command drains the app's
 * consumers and ends it. (test/e2e/pack-install runs the same sources installed from the packed tarballs.)
 */
describe('npm run example:orders', () => {
  const instanceId = `example-${randomUUID().slice(0, 6)}`;
  const topics = { orders: uniqueTopic('example-orders'), prices: uniqueTopic('example-prices') };
  let instance: InstanceProcess;
  let temporal: { client: Client; close(): Promise<void> };

  beforeAll(async () => {
    temporal = await temporalClient();
    instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      EVENTMESH_KAFKA_TOPICS: `${topics.orders},${topics.prices}`,
    });
    await instance.ready();
    await deleteOrdersSubscriptions(instance.url!);
  }, 120000);

  afterAll(async () => {
    if (instance?.url) await deleteOrdersSubscriptions(instance.url).catch(() => undefined);
    await instance?.stop();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await temporal.close();
  });

  it('builds and starts the example, which publishes, handles, answers a request, and drains on SIGTERM', async () => {
    // Its own process group, as a terminal runs it: the signal reaches npm and the app below it.
    const command = spawn('npm', ['run', 'example:orders'], {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: '0',
        EVENTMESH_URL: instance.url!,
        ORDERS_TOPIC: topics.orders,
        PRICES_TOPIC: topics.prices,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    command.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    command.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<void>((resolve) => command.once('exit', () => resolve()));
    try {
      await exerciseOrdersApp(await ordersAppUrl(() => out));
      process.kill(-command.pid!, 'SIGTERM');
      await exited;
      expect(out).toContain('drained 2 consumers');
    } finally {
      if (command.exitCode === null && command.signalCode === null) process.kill(-command.pid!, 'SIGKILL');
    }
  }, 300000);
});
