import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { SecretBox } from '@libs/security';
import type { JobRow, JobView } from '../store/job-store';
import { registerJobsRoutes, type JobsRoutesDeps } from './jobs-routes';

/** The jobs of one tenant in memory, as JobStore keeps them in `connectors.jobs`. */
class Jobs {
  readonly rows = new Map<string, JobRow>();

  async create(tenant: string, name: string, kind: string, config: Record<string, unknown>) {
    if ([...this.rows.values()].some((r) => r.tenant === tenant && r.name === name)) return undefined;
    const now = new Date();
    const row: JobRow = {
      id: randomUUID(),
      tenant,
      name,
      kind,
      config,
      state: 'RUNNING',
      lastError: null,
      lastErrorAt: null,
      createdAt: now,
      updatedAt: now,
    };
    this.rows.set(row.id, row);
    return row;
  }

  async get(tenant: string, id: string): Promise<JobView | undefined> {
    const row = this.rows.get(id);
    if (!row || row.tenant !== tenant) return undefined;
    return {
      ...row,
      position: null,
      moved: 0,
      deadLettered: 0,
      positionUpdatedAt: null,
      epoch: null,
      owner: null,
      renewedAt: null,
      rejectedWrites: 0,
      movedLastMinute: 0,
    };
  }

  async reconfigure(tenant: string, id: string, config: Record<string, unknown>) {
    const row = this.rows.get(id);
    if (!row || row.tenant !== tenant) return false;
    row.config = config;
    return true;
  }

  async delete(tenant: string, id: string) {
    const row = this.rows.get(id);
    return row?.tenant === tenant && this.rows.delete(id);
  }
}

/**
 * The job admin routes against a Temporal that fails: a job is never left stored without its workflow by a
 * create, and a reconfigure whose restart could not be sent says what was kept. The gate, the target guard and
 * the store are fakes; test/e2e/connectors-tenants.e2e-spec.ts runs the routes against the real ones.
 */
describe('/admin/jobs when Temporal fails', () => {
  const connection = { host: '127.0.0.1', database: 'shop', user: 'u', password: 'outbox-pass-9f3k2' };
  const body = (name: string) => ({
    name,
    kind: 'postgres-outbox',
    mesh: { apiKey: 'emk_a_b' },
    config: { connection, table: 'outbox' },
  });
  let app: FastifyInstance;
  let jobs: Jobs;
  const temporal = { started: 0, failing: false, signals: [] as string[] };

  beforeEach(async () => {
    jobs = new Jobs();
    Object.assign(temporal, { started: 0, failing: false, signals: [] });
    const fail = () => {
      throw Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14 });
    };
    const client = {
      workflow: {
        start: async () => {
          if (temporal.failing) fail();
          temporal.started++;
        },
        signalWithStart: async (_workflow: string, options: { signal: { name: string } | string }) => {
          if (temporal.failing) fail();
          temporal.signals.push(typeof options.signal === 'string' ? options.signal : options.signal.name);
        },
        getHandle: () => ({
          signal: async (signal: { name: string }) => {
            if (temporal.failing) fail();
            temporal.signals.push(signal.name);
          },
          terminate: async () => undefined,
        }),
      },
    };
    const deps = {
      gate: { admit: async () => ({ tenant: 't1' }), tenantOf: async () => 't1' },
      jobs,
      runs: {},
      secrets: new SecretBox([{ id: 'k', key: Buffer.alloc(32, 1) }], 'k'),
      targets: { pinHost: async () => '127.0.0.1' },
      temporal: client,
      meshUrl: 'http://127.0.0.1:1',
      runMs: 60000,
      heartbeatMs: 10000,
    } as unknown as JobsRoutesDeps;
    app = Fastify({ logger: false });
    registerJobsRoutes(app, deps);
    await app.ready();
  });
  afterEach(() => app.close());

  it('a create whose workflow cannot be started is undone: 503 DEPENDENCY_UNAVAILABLE, no job stored, and the create asked again goes through', async () => {
    temporal.failing = true;
    const refused = await app.inject({ method: 'POST', url: '/admin/jobs', payload: body('orders') });
    expect({ status: refused.statusCode, body: refused.json() }).toMatchObject({
      status: 503,
      body: { code: 'DEPENDENCY_UNAVAILABLE', dependency: 'temporal' },
    });
    expect(jobs.rows.size).toBe(0);
    temporal.failing = false;
    const created = await app.inject({ method: 'POST', url: '/admin/jobs', payload: body('orders') });
    expect(created.statusCode).toBe(201);
    expect(temporal.started).toBe(1);
    expect([...jobs.rows.values()].map((r) => r.name)).toEqual(['orders']);
  });

  it('a reconfigure whose restart cannot be sent: 503 DEPENDENCY_UNAVAILABLE saying the config is stored (every run reads it at its start); pause, resume and restart 503, not 500', async () => {
    const created = await app.inject({ method: 'POST', url: '/admin/jobs', payload: body('orders') });
    const id = (created.json() as { id: string }).id;
    temporal.failing = true;
    const reconfigured = await app.inject({
      method: 'PUT',
      url: `/admin/jobs/${id}/config`,
      payload: { mesh: { apiKey: 'emk_a_b' }, config: { connection, table: 'outbox', batchSize: 7 } },
    });
    expect({ status: reconfigured.statusCode, body: reconfigured.json() }).toMatchObject({
      status: 503,
      body: { code: 'DEPENDENCY_UNAVAILABLE', dependency: 'temporal', stored: true },
    });
    expect((jobs.rows.get(id)!.config.config as { batchSize: number }).batchSize).toBe(7);
    for (const action of ['pause', 'resume', 'restart']) {
      const answer = await app.inject({ method: 'POST', url: `/admin/jobs/${id}/${action}` });
      expect({ action, status: answer.statusCode, code: (answer.json() as { code: string }).code }).toEqual({
        action,
        status: 503,
        code: 'DEPENDENCY_UNAVAILABLE',
      });
    }
    temporal.failing = false;
    const again = await app.inject({
      method: 'PUT',
      url: `/admin/jobs/${id}/config`,
      payload: { mesh: { apiKey: 'emk_a_b' }, config: { connection, table: 'outbox', batchSize: 7 } },
    });
    expect(again.statusCode).toBe(200);
    expect(temporal.signals).toEqual(['restart']);
  });
});
