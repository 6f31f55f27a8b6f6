import { ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { withDeadline } from '@libs/runtime/deadline';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { a2aSearchAttributes, a2aTaskWorkflowIdOf } from '../../contracts';
import { testConfig, testEnv, TEST_NAMESPACE, uniqueTopic } from '../support/env';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

const ROOT = path.resolve(__dirname, '../..');

/** A command of the README, run as a user runs it (its own process group), its output collected. */
function run(
  command: string,
  args: string[],
  env: Record<string, string>,
): { child: ChildProcess; output(): string; exited: Promise<number | null> } {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

const freePort = () => String(18000 + Math.floor(Math.random() * 1000));

/**
 * The README's run command as a user runs it (`npm start` is `bash scripts/run.sh`): it brings the servers up
 * (already running here), migrates, starts the instance and prints the URLs; Ctrl-C stops it cleanly. And its A2A
 * walkthrough: `npm run agent:echo`, the card registered with curl's request, `npm run a2a:send` (the SDK's stock
 * client through the mesh), the task's workflow in Temporal.
 */
/** The Temporal Web UI of the servers these tests run against (scripts/test.sh may give a lane servers of its own). */
const TEMPORAL_UI = testConfig().temporal.uiUrl;

describe('the run command', () => {
  let temporal: { client: Client; close(): Promise<void> };
  const instanceId = `run-${randomUUID().slice(0, 6)}`;
  const a2aInstanceId = `run-a2a-${randomUUID().slice(0, 6)}`;

  beforeAll(async () => {
    temporal = await temporalClient();
  });
  afterAll(async () => {
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId), dispatchWorkflowIdOf(a2aInstanceId)]);
    await temporal.close();
  });

  it('starts an instance, prints the API, health and Temporal UI URLs, and stops on SIGINT', async () => {
    const port = freePort();
    const instance = run(
      'bash',
      ['scripts/run.sh'],
      testEnv({
        EVENTMESH_HTTP_PORT: port,
        EVENTMESH_INSTANCE_ID: instanceId,
        EVENTMESH_KAFKA_TOPICS: uniqueTopic('run'),
      }),
    );
    try {
      await waitFor('the banner', () => instance.output().includes('eventmesh is running'), { timeoutMs: 120000 });
      const out = instance.output();
      expect(out).toContain(`API          http://127.0.0.1:${port}`);
      expect(out).toContain(`Health       http://127.0.0.1:${port}/health`);
      expect(out).toContain(`Temporal UI  ${TEMPORAL_UI}/namespaces/${TEST_NAMESPACE}/workflows`);
      const health = await fetch(`http://127.0.0.1:${port}/health`);
      expect(health.status).toBe(200);
      const ui = await fetch(`${TEMPORAL_UI}/namespaces/${TEST_NAMESPACE}/workflows`);
      expect(ui.status).toBe(200);
    } finally {
      process.kill(-instance.child.pid!, 'SIGINT');
    }
    // A deadline whose timer is cleared once the process exits: a timer left pending kept jest alive 30 s past the run.
    expect(await withDeadline(30000, instance.exited)).toBe(0);
  });

  it('the A2A walkthrough: the echo agent registered, a task sent by a2a:send completes, its workflow in Temporal with its search attributes', async () => {
    const port = freePort();
    const agentPort = String(19000 + Math.floor(Math.random() * 1000));
    const mesh = `http://127.0.0.1:${port}`;
    const instance = run(
      'bash',
      ['scripts/run.sh'],
      testEnv({
        EVENTMESH_HTTP_PORT: port,
        EVENTMESH_INSTANCE_ID: a2aInstanceId,
        EVENTMESH_KAFKA_TOPICS: uniqueTopic('run'),
        EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
      }),
    );
    const agent = run('npm', ['run', '--silent', 'agent:echo', '--', '--port', agentPort], {});
    try {
      await waitFor('the banner', () => instance.output().includes('eventmesh is running'), { timeoutMs: 120000 });
      await waitFor(
        'the echo agent',
        () => agent.output().includes(`A2A v1.0 JSON-RPC at http://127.0.0.1:${agentPort}/`),
        { timeoutMs: 30000 },
      );
      const name = `echo-${randomUUID().slice(0, 6)}`;
      const put = await fetch(`${mesh}/a2a/agents/${name}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          name,
          description: 'echoes',
          version: '1.0.0',
          capabilities: {},
          defaultInputModes: ['text/plain'],
          defaultOutputModes: ['text/plain'],
          skills: [],
          supportedInterfaces: [
            { url: `http://127.0.0.1:${agentPort}/`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
          ],
        }),
      });
      expect(put.status).toBe(201);

      const send = run('npm', ['run', '--silent', 'a2a:send', '--', name, 'hello', '--mesh', mesh], {
        EVENTMESH_TEMPORAL_NAMESPACE: TEST_NAMESPACE,
      });
      expect(await withDeadline(60000, send.exited)).toBe(0);
      const printed =
        /^task (\S+): TASK_STATE_COMPLETED\n {2}artifacts: \["hello"\]\n {2}its workflow a2a-task\/\1 in the Temporal UI: (\S+)\n$/.exec(
          send.output(),
        );
      expect(printed).not.toBeNull();
      const [, taskId, link] = printed!;
      expect(link).toBe(
        `${TEMPORAL_UI}/namespaces/${TEST_NAMESPACE}/workflows?query=${encodeURIComponent(`WorkflowId="a2a-task/${taskId}"`)}`,
      );
      // A blocking send is answered once the outcome is recorded; the workflow ends just after.
      const handle = temporal.client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId));
      const description = await waitFor('the task workflow completed', async () => {
        const d = await handle.describe();
        return d.status.name === 'COMPLETED' && d;
      });
      expect(description.typedSearchAttributes.get(a2aSearchAttributes.agent)).toBe(name);
      expect(description.typedSearchAttributes.get(a2aSearchAttributes.state)).toBe('completed');

      // Bad arguments: the usage and exit code 64.
      const bad = run('npm', ['run', '--silent', 'a2a:send', '--', name], {});
      expect(await withDeadline(60000, bad.exited)).toBe(64);
      expect(bad.output()).toContain('usage: npm run a2a:send -- <agent> <text>');
    } finally {
      // Both stopped whatever failed; a process group already gone (its command ended early) is not an error.
      for (const group of [agent, instance])
        if (group.child.exitCode === null && group.child.signalCode === null) process.kill(-group.child.pid!, 'SIGINT');
    }
    expect(await withDeadline(30000, instance.exited)).toBe(0);
    // Ctrl-C stops the agent (npm, in its group too, ends by the signal: no exit code); a hang fails the deadline.
    await withDeadline(30000, agent.exited);
  });
});
