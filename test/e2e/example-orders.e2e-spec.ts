import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { dispatchWorkflowIdOf } from '@libs/temporal';
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
describe("the orders example and the README's TypeScript block, run as written", () => {
  const instanceId = `example-${randomUUID().slice(0, 6)}`;
  const topics = { orders: uniqueTopic('example-orders'), prices: uniqueTopic('example-prices') };
  let instance: InstanceProcess;
  let temporal: { client: Client; close(): Promise<void> };

  beforeAll(async () => {
    temporal = await temporalClient();
    instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      // `events` first, the default topic, as `npm start` has it: the README's TypeScript block publishes there.
      EVENTMESH_KAFKA_TOPICS: `events,${topics.orders},${topics.prices}`,
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
    // 'close': npm may exit before the app below it, which holds the output pipes until it has drained and ended.
    const ended = new Promise<void>((resolve) => command.once('close', () => resolve()));
    try {
      await exerciseOrdersApp(await ordersAppUrl(() => out));
      process.kill(-command.pid!, 'SIGTERM');
      await ended;
      expect(out).toContain('drained 2 consumers');
    } finally {
      if (command.exitCode === null && command.signalCode === null) process.kill(-command.pid!, 'SIGKILL');
    }
  }, 300000);

  it('runs the README\'s "Use it from TypeScript" block: the event published, then handled by the consumer', async () => {
    // The block as a reader copies it, but for `npm run build` (the suite runs built) and the instance's URL.
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Use it from TypeScript'));
    const block = /```bash\n([\s\S]*?)```/.exec(section)![1];
    expect(block).toContain('npm run build\n');
    const script = block.replace('npm run build\n', '').replaceAll('http://localhost:8080', instance.url!);
    const { stdout } = await promisify(execFile)('bash', ['-c', script], { cwd: ROOT, timeout: 120000 });
    // Node prints the answer on one line or, when it is long, one field a line.
    expect(stdout).toMatch(/^published \{\s+id: '[^']+',\s+topic: 'events',\s+partition: \d+,\s+offset: \d+\s+\}$/m);
    expect(stdout).toMatch(/^handled order\.created \{"total":12\}$/m);
  }, 180000);
});
