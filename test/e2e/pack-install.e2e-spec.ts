import { ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { deleteOrdersSubscriptions, exerciseOrdersApp, ordersAppUrl } from '../support/orders-app';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The packages as a new user installs them: scripts/pack-install-test.sh packs both and installs the tarballs into
 * a fresh NestJS app (the orders example's sources) in a temporary folder outside the repo, with Nest from the
 * registry at the versions scripts/pack-install/package-lock.json pins (from the npm cache when it holds them, so
 * registry latency does not make the test slow or flaky). The app boots against a real instance; its controller publishes, its decorated handler receives, its
 * responder answers a request, and SIGTERM drains and ends it with code 0.
 */
describe('@eventmesh/client and @eventmesh/nestjs installed from their tarballs', () => {
  const instanceId = `pack-${randomUUID().slice(0, 6)}`;
  const topics = { orders: uniqueTopic('pack-orders'), prices: uniqueTopic('pack-prices') };
  const work = realpathSync(mkdtempSync(path.join(tmpdir(), 'eventmesh-pack-')));
  let instance: InstanceProcess;
  let temporal: { client: Client; close(): Promise<void> };
  let app: ChildProcess | undefined;
  let readmeApp: ChildProcess | undefined;
  let appOut = '';

  beforeAll(async () => {
    temporal = await temporalClient();
    instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      // `orders` and `prices` too: the README's app names them.
      EVENTMESH_KAFKA_TOPICS: `${topics.orders},${topics.prices},orders,prices`,
    });
    await Promise.all([
      instance.ready(),
      promisify(execFile)('bash', [path.join(ROOT, 'scripts/pack-install-test.sh'), work], {
        cwd: ROOT,
        timeout: 600000,
      }),
    ]);
    await deleteOrdersSubscriptions(instance.url!);
  }, 660000);

  afterAll(async () => {
    if (app?.exitCode === null) app.kill('SIGKILL');
    if (readmeApp?.exitCode === null) readmeApp.kill('SIGKILL');
    if (instance?.url) await deleteOrdersSubscriptions(instance.url).catch(() => undefined);
    await instance?.stop();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await temporal.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('installed both packages from the tarballs into an app outside the repo', () => {
    expect(work.startsWith(`${ROOT}/`)).toBe(false);
    const appDir = path.join(work, 'app');
    for (const name of ['@eventmesh/client', '@eventmesh/nestjs', '@nestjs/core']) {
      const manifest = require.resolve(`${name}/package.json`, { paths: [appDir] });
      expect(manifest).toBe(path.join(appDir, 'node_modules', name, 'package.json'));
    }
    const lock = JSON.parse(readFileSync(path.join(appDir, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { resolved?: string }>;
    };
    expect(lock.packages['node_modules/@eventmesh/nestjs'].resolved).toMatch(/^file:.*eventmesh-nestjs-.*\.tgz$/);
    // The SDK the module uses is the one tarball, not a second copy under the module.
    expect(lock.packages['node_modules/@eventmesh/nestjs/node_modules/@eventmesh/client']).toBeUndefined();
  });

  it('boots, publishes from the controller, receives in the decorated handler, answers a request, and drains on SIGTERM', async () => {
    app = spawn(process.execPath, ['dist/main.js'], {
      cwd: path.join(work, 'app'),
      env: {
        PATH: process.env.PATH ?? '',
        PORT: '0',
        EVENTMESH_URL: instance.url!,
        ORDERS_TOPIC: topics.orders,
        PRICES_TOPIC: topics.prices,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    app.stdout!.on('data', (d: Buffer) => (appOut += d.toString()));
    app.stderr!.on('data', (d: Buffer) => (appOut += d.toString()));
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      app!.once('exit', (code, signal) => resolve({ code, signal })),
    );
    await exerciseOrdersApp(await ordersAppUrl(() => appOut));

    // enableShutdownHooks: Nest closes the app (the module drains both consumers, then closes the client), then
    // ends the process with the signal it got.
    app.kill('SIGTERM');
    expect(await exited).toEqual({ code: null, signal: 'SIGTERM' });
    expect(appOut).toContain('drained 2 consumers');
  }, 180000);

  it('runs the README\'s "Use it from NestJS" app as written: the order is handled and its price comes back', async () => {
    // Its subscriptions have the example's names on other topics: the example's are gone first.
    await deleteOrdersSubscriptions(instance.url!);
    // scripts/pack-install-test.sh copied the README's block into the app as src/readme-app.ts, compiled with it.
    let out = '';
    readmeApp = spawn(process.execPath, ['dist/readme-app.js'], {
      cwd: path.join(work, 'app'),
      env: { PATH: process.env.PATH ?? '', EVENTMESH_URL: instance.url! },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    readmeApp.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    readmeApp.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<void>((resolve) => readmeApp!.once('exit', () => resolve()));
    // The README's curl: the app listens on 127.0.0.1:3100 once Nest has started.
    const answer = await waitFor(
      "the README's app to answer",
      async () => {
        const res = await fetch('http://127.0.0.1:3100/orders', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ sku: 'abc', quantity: 2 }),
        });
        return res.status === 201 ? ((await res.json()) as unknown) : undefined;
      },
      { timeoutMs: 60000 },
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${out}`);
    });
    expect(answer).toEqual({ accepted: true, price: { sku: 'abc', unitPrice: 103 } });
    await waitFor('the handler to log the order', () => out.includes('order received: 2 x abc') || undefined, {
      timeoutMs: 60000,
    });
    readmeApp.kill('SIGTERM');
    await exited;
  }, 180000);
});
