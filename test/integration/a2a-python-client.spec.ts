import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { endTaskWorkflows } from '../support/a2a-tasks';
import { EchoAgent } from '../support/a2a-echo-agent';
import { testConfig, uniqueTopic } from '../support/env';
import { headerTenantGate } from '../support/header-tenant-gate';

const run = promisify(execFile);

/**
 * The mesh through the official Python A2A client (`a2a-sdk` from PyPI, its stock ClientFactory): a real instance
 * (gateway and worker) in front of the test echo agent, and test/a2a-python/mesh_checks.py calling it, one check per
 * line: send, get, list, cancel, streaming, a subscribe of an unknown task (the error the SDK's streaming client reads
 * from the stream), the refusals the A2A TCK checks, the mesh's card at the host root and a message routed by its
 * skill.
 */
describe('A2A through the official Python client (a2a-sdk)', () => {
  const tenant = `a2a-py-${randomUUID().slice(0, 8)}`;
  const agent = new EchoAgent();
  let instance: RunningInstance;
  /** The official Python client's virtual environment (test/a2a-python/venv.sh pins the version). */
  let venv: string;

  beforeAll(async () => {
    venv = (await run('bash', ['test/a2a-python/venv.sh'])).stdout.trim();
    await agent.start();
    const gate = headerTenantGate('ingress');
    instance = await startInstance(
      testConfig({
        EVENTMESH_INSTANCE_ID: `a2a-py-${tenant}`,
        EVENTMESH_KAFKA_TOPICS: uniqueTopic('a2a-py'),
        EVENTMESH_HTTP_PORT: '0',
        EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
      }),
      {
        roles: ['gateway', 'worker'],
        gates: { ingress: gate, admin: headerTenantGate('admin'), close: async () => undefined },
      },
    );
    const registered = await fetch(`${instance.url}/a2a/agents/echo`, {
      method: 'PUT',
      headers: { 'x-test-tenant': tenant, 'content-type': 'application/json' },
      body: JSON.stringify(agent.card()),
    });
    expect(registered.status).toBe(201);
  }, 300_000);
  afterAll(async () => {
    await endTaskWorkflows([tenant]);
    await instance?.close();
    await agent.close();
  });

  it('passes every check of the stock client', async () => {
    const { stdout } = await run(
      `${venv}/bin/python`,
      ['test/a2a-python/mesh_checks.py', instance.url!, 'echo', `x-test-tenant=${tenant}`],
      { timeout: 120_000 },
    ).catch((e: { stdout: string; stderr: string }) => ({ stdout: `${e.stdout}\n${e.stderr}` }));
    expect(stdout.trim().split('\n')).toEqual([
      'PASS send',
      'PASS get',
      'PASS list',
      'PASS cancel',
      'PASS streaming',
      'PASS resubscribe-unknown-task',
      'PASS tck-refusals',
      'PASS discovery-and-skill-routing',
    ]);
  }, 180_000);
});
