import { spawn } from 'node:child_process';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { withDeadline } from '../../libs/runtime/deadline';
import { dispatchWorkflowIdOf } from '../../libs/temporal';
import { testEnv, uniqueTopic } from '../support/env';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * The README's run command as a user runs it (`npm start` is `bash scripts/run.sh`): it brings the servers up
 * (already running here), migrates, starts the instance and prints the URLs; Ctrl-C stops it cleanly.
 */
describe('the run command', () => {
  let temporal: { client: Client; close(): Promise<void> };
  const instanceId = `run-${randomUUID().slice(0, 6)}`;

  beforeAll(async () => {
    temporal = await temporalClient();
  });
  afterAll(async () => {
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await temporal.close();
  });

  it('starts an instance, prints the API, health and Temporal UI URLs, and stops on SIGINT', async () => {
    const port = String(18000 + Math.floor(Math.random() * 1000));
    const child = spawn('bash', [path.resolve(__dirname, '../../scripts/run.sh')], {
      env: { ...process.env, ...testEnv({ EVENTMESH_HTTP_PORT: port, EVENTMESH_INSTANCE_ID: instanceId, EVENTMESH_KAFKA_TOPICS: uniqueTopic('run') }) },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await waitFor('the banner', () => out.includes('eventmesh is running'), { timeoutMs: 120000 });
      expect(out).toContain(`API          http://127.0.0.1:${port}`);
      expect(out).toContain(`Health       http://127.0.0.1:${port}/health`);
      expect(out).toMatch(/Temporal UI {2}http:\/\/127\.0\.0\.1:8233\/namespaces\/eventmesh-test\/workflows/);
      const health = await fetch(`http://127.0.0.1:${port}/health`);
      expect(health.status).toBe(200);
      const ui = await fetch('http://127.0.0.1:8233/namespaces/eventmesh-test/workflows');
      expect(ui.status).toBe(200);
    } finally {
      process.kill(-child.pid!, 'SIGINT');
    }
    // A deadline whose timer is cleared once the process exits: a timer left pending kept jest alive 30 s past the run.
    expect(await withDeadline(30000, exited)).toBe(0);
  });
});
