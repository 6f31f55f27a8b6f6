import { randomUUID } from 'node:crypto';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import type { LivenessReport, ReadinessReport } from '@libs/health';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { testConfig, uniqueTopic } from '../support/env';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * The health probes of a real instance (gateway and worker) against the real servers: liveness answers from the
 * process alone; readiness reports the dependencies and the running dispatch loop, and many concurrent probes
 * share one round of backend checks; /health keeps the detailed view and shows delivery progress too.
 */
describe('health probes (real servers)', () => {
  const topic = uniqueTopic('health');
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `health-${randomUUID().slice(0, 8)}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_HEALTH_CHECK_CACHE_MS: '60000',
  });
  let instance: RunningInstance;

  beforeAll(async () => {
    instance = await startInstance(config);
  });
  afterAll(async () => {
    await instance?.close();
    const temporal = await temporalClient();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(config.instance.id)]);
    await temporal.close();
  });

  it('answers liveness with the process alone', async () => {
    const response = await fetch(`${instance.url}/health/live`);
    expect(response.status).toBe(200);
    const live = (await response.json()) as LivenessReport;
    expect(live).toEqual({
      status: 'up',
      instance: config.instance.id,
      pid: process.pid,
      uptimeSeconds: expect.any(Number) as number,
    });
  });

  it('is ready once the dispatch loop runs, with every dependency up', async () => {
    const ready = await waitFor(
      'a ready answer with the dispatch loop running',
      async () => {
        const response = await fetch(`${instance.url}/health/ready`);
        const body = (await response.json()) as ReadinessReport;
        return response.status === 200 && body.delivery.loops === 1 && body;
      },
      { timeoutMs: 30000, intervalMs: 250 },
    );
    expect(ready).toMatchObject({
      status: 'up',
      instance: config.instance.id,
      dependencies: { postgres: { status: 'up' }, kafka: { status: 'up' }, temporal: { status: 'up' } },
      delivery: { status: 'up', loops: 1, staleAfterMs: 30000 },
    });
    expect(ready.delivery.lastRoundAgeMs).toBeLessThan(30000);
  });

  it('shares one round of backend checks between concurrent probes and /health', async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        fetch(`${instance.url}/health/ready`).then((r) => r.json() as Promise<ReadinessReport>),
      ),
    );
    expect(new Set(answers.map((a) => a.checkedAt)).size).toBe(1);
    const detail = (await (await fetch(`${instance.url}/health`)).json()) as {
      status: string;
      dependencies: unknown;
      delivery: unknown;
    };
    // Within the cache period, the detailed view shows the same round's dependencies.
    expect(detail.dependencies).toEqual(answers[0].dependencies);
    expect(detail.delivery).toMatchObject({ status: 'up', loops: 1 });
  });
});
