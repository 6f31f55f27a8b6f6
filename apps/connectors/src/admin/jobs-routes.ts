import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { SignalDefinition, Workflow } from '@temporalio/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  CONNECTOR_JOB_QUEUE,
  connectorJobSearchAttributes,
  connectorJobWorkflowIdOf,
  pauseJobSignal,
  restartJobSignal,
} from '../../../../contracts';
import { ErrorCode, EventMeshError, HTTP_STATUS_BY_CODE } from '@libs/errors';
import { createLogger } from '@libs/logging';
import type { SecretBox } from '@libs/security';
import { CONNECTOR_KINDS } from '../connectors';
import { meshClientOf } from '../jobs/job-activities';
import { jobSpecOf, opened, sealed, shown, type JobSpec } from '../jobs/job-spec';
import { publish } from '../jobs/publish-lanes';
import type { TargetGuard } from '../jobs/target-guard';
import { ConfigFieldError, type SourceRecord } from '../spi';
import type { JobRunStore } from '../store/job-run-store';
import { AlreadyReplayedError, DeadLetterGoneError, type JobStore, type JobView } from '../store/job-store';
import type { AdminGate } from './admin-gate';
import { lagOf, throughputOf } from './job-flow';

export interface JobsRoutesDeps {
  gate: AdminGate;
  jobs: JobStore;
  runs: JobRunStore;
  secrets: SecretBox;
  targets: TargetGuard;
  temporal: Client;
  meshUrl: string;
  runMs: number;
  heartbeatMs: number;
}

const notFound = () => new EventMeshError(ErrorCode.NotFound, 'no such job');

/**
 * `/admin/jobs`: the jobs of the caller's tenant (another tenant's job is a 404). Create validates the config and
 * the targets' addresses before anything is stored, and a job whose workflow does not start is deleted again;
 * state changes go to the job's workflow as signals (as the Temporal UI sends them), which records the state, and a
 * job whose workflow is gone gets it started again with the signal; the position reset fences the running loop
 * first. A reconfigure stores the config, which every run of the job reads at its start, and restarts the run.
 */
export function registerJobsRoutes(app: FastifyInstance, deps: JobsRoutesDeps): void {
  const log = createLogger('AdminJobs');
  const route = <P>(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    url: string,
    handler: (
      req: FastifyRequest<{ Params: P; Querystring: Record<string, string> }>,
      tenant: string,
    ) => Promise<[number, unknown]>,
  ) =>
    app.route<{ Params: P; Querystring: Record<string, string> }>({
      method,
      url,
      handler: async (req, reply) => {
        try {
          const caller = await deps.gate.admit(req, `${method} ${url}`);
          const [status, body] = await handler(req, caller.tenant);
          return reply.code(status).send(body);
        } catch (e) {
          return answerError(reply, e, log);
        }
      },
    });
  const job = async (tenant: string, id: string): Promise<JobView> =>
    (await deps.jobs.get(tenant, id)) ?? throwIt(notFound());
  const handle = (id: string) => deps.temporal.workflow.getHandle(connectorJobWorkflowIdOf(id));
  /** The job's workflow as it is started: by the job's create, or again by a signal when it is gone. */
  const workflowOf = (j: { id: string; kind: string; tenant: string }, paused: boolean) => ({
    workflowId: connectorJobWorkflowIdOf(j.id),
    taskQueue: CONNECTOR_JOB_QUEUE,
    args: [{ jobId: j.id, runMs: deps.runMs, heartbeatMs: deps.heartbeatMs, paused }],
    typedSearchAttributes: [
      { key: connectorJobSearchAttributes.kind, value: j.kind },
      { key: connectorJobSearchAttributes.tenant, value: j.tenant },
      { key: connectorJobSearchAttributes.state, value: paused ? 'PAUSED' : 'RUNNING' },
    ],
  });
  /**
   * Sends `signal` to the job's workflow; a workflow that is gone (terminated in the Temporal UI, or a create's
   * start lost) is started first, `paused` or not, so a job always has one to act on.
   */
  const signalled = (
    j: JobView,
    signal: SignalDefinition<[boolean]> | SignalDefinition<[]>,
    args: unknown[],
    paused: boolean,
  ) =>
    deps.temporal.workflow.signalWithStart<Workflow, unknown[]>('connectorJobWorkflow', {
      ...workflowOf(j, paused),
      signal: signal.name,
      signalArgs: args,
    });

  const checked = async (spec: JobSpec, tenant: string): Promise<void> => {
    const credentialTenant = await deps.gate.tenantOf(spec.mesh);
    if (credentialTenant !== undefined && credentialTenant !== tenant && (spec.mesh.apiKey || spec.mesh.token))
      throw new ConfigFieldError('mesh', `the credential is of another tenant than the caller's (${tenant})`);
    const target = (spec.config as { connection: { host: string; port: number; database: string } }).connection;
    await deps.targets.pinHost(target.host, target.port, target.database);
  };

  route<Record<string, never>>('POST', '/admin/jobs', async (req, tenant) => {
    const spec = jobSpecOf(req.body);
    await checked(spec, tenant);
    const row = await deps.jobs.create(tenant, spec.name, spec.kind.kind, sealed(spec, deps.secrets));
    if (!row)
      throw new EventMeshError(ErrorCode.IllegalTransition, `the tenant already has a job named ${spec.name}`, {
        field: 'name',
      });
    try {
      await deps.temporal.workflow.start('connectorJobWorkflow', workflowOf(row, false));
    } catch (e) {
      // No job without its workflow: the row goes again, so the create can be asked again.
      const undone = await deps.jobs.delete(tenant, row.id).then(
        () => true,
        (deleteError: Error) => {
          log.error({ jobId: row.id, error: deleteError.message }, 'a job whose workflow did not start stays');
          return false;
        },
      );
      const cause = `the job's workflow could not be started (${(e as Error).message})`;
      throw undone
        ? temporalUnavailable(`${cause}; nothing was created, try again`, e)
        : temporalUnavailable(`${cause}, and the job stays without it: resume it to start it, or delete it`, e, {
            id: row.id,
          });
    }
    return [201, viewOf(await job(tenant, row.id))];
  });

  /** The job as the reads show it: with its lag, read from its source or its subscription now. */
  const withLag = async (j: JobView, req: FastifyRequest) => ({ ...viewOf(j), lag: await lagOf(j, req, deps) });

  route<Record<string, never>>('GET', '/admin/jobs', async (req, tenant) => [
    200,
    await Promise.all((await deps.jobs.list(tenant)).map((j) => withLag(j, req))),
  ]);

  route<{ id: string }>('GET', '/admin/jobs/:id', async (req, tenant) => [
    200,
    await withLag(await job(tenant, req.params.id), req),
  ]);

  route<{ id: string }>('PUT', '/admin/jobs/:id/config', async (req, tenant) => {
    const current = await job(tenant, req.params.id);
    const spec = jobSpecOf(req.body, {
      name: current.name,
      kind: current.kind,
      stored: current.config,
      box: deps.secrets,
    });
    await checked(spec, tenant);
    await deps.jobs.reconfigure(tenant, current.id, sealed(spec, deps.secrets));
    // The stored config is what the job's next run reads; the restart only makes the running one end now.
    try {
      await signalled(current, restartJobSignal, [], current.state === 'PAUSED');
    } catch (e) {
      throw temporalUnavailable(
        `the config is stored and the job's next run reads it; its restart could not be sent now (${(e as Error).message}): ask again to restart it now`,
        e,
        { stored: true },
      );
    }
    return [200, viewOf(await job(tenant, current.id))];
  });

  for (const [action, signal] of [
    ['pause', (j: JobView) => signalled(j, pauseJobSignal, [true], true)],
    ['resume', (j: JobView) => signalled(j, pauseJobSignal, [false], false)],
    ['restart', (j: JobView) => signalled(j, restartJobSignal, [], j.state === 'PAUSED')],
  ] as const) {
    route<{ id: string }>('POST', `/admin/jobs/:id/${action}`, async (req, tenant) => {
      const current = await job(tenant, req.params.id);
      try {
        await signal(current);
      } catch (e) {
        throw temporalUnavailable(
          `the ${action} could not be sent to the job's workflow (${(e as Error).message}); nothing changed, try again`,
          e,
        );
      }
      return [202, { id: current.id, requested: action }];
    });
  }

  route<{ id: string }>('DELETE', '/admin/jobs/:id', async (req, tenant) => {
    const current = await job(tenant, req.params.id);
    await handle(current.id)
      .terminate('job deleted')
      .catch((e) => {
        if (!(e instanceof WorkflowNotFoundError)) throw e;
      });
    await deps.jobs.delete(tenant, current.id);
    return [204, undefined];
  });

  route<{ id: string }>('POST', '/admin/jobs/:id/position', async (req, tenant) => {
    const current = await job(tenant, req.params.id);
    const { position } = (req.body ?? {}) as { position?: unknown };
    const kind = CONNECTOR_KINDS.get(current.kind);
    if (kind?.role !== 'source')
      throw new EventMeshError(ErrorCode.InvalidRequest, 'only a source job has a position to reset', {
        field: 'position',
      });
    if (position !== null && (typeof position !== 'string' || position === ''))
      throw new EventMeshError(
        ErrorCode.InvalidRequest,
        'position: expected a position of the source, or null for the start',
        { field: 'position' },
      );
    const refused = position === null ? undefined : kind.validatePosition?.(position);
    if (refused !== undefined)
      throw new EventMeshError(ErrorCode.InvalidRequest, `position: ${refused}`, { field: 'position' });
    if (current.state !== 'PAUSED')
      throw new EventMeshError(ErrorCode.IllegalTransition, 'pause the job before resetting its position', {
        state: current.state,
      });
    await deps.runs.resetPosition(current.id, position);
    return [200, viewOf(await job(tenant, current.id))];
  });

  route<{ id: string }>('GET', '/admin/jobs/:id/dead-letters', async (req, tenant) => {
    const current = await job(tenant, req.params.id);
    const limit = limitOf(req.query.limit);
    const after = req.query.after;
    if (after !== undefined && !/^\d{1,18}$/.test(after))
      throw new EventMeshError(ErrorCode.InvalidRequest, 'after: expected a dead letter id', { field: 'after' });
    return [200, await deps.jobs.deadLetters(current.id, after, limit)];
  });

  route<{ id: string; deadLetterId: string }>(
    'POST',
    '/admin/jobs/:id/dead-letters/:deadLetterId/replay',
    async (req, tenant) => {
      const current = await job(tenant, req.params.id);
      if (!/^\d{1,18}$/.test(req.params.deadLetterId))
        throw new EventMeshError(ErrorCode.DeadLetterNotFound, 'no such dead letter');
      const dead = await deps.jobs.deadLetter(current.id, req.params.deadLetterId);
      if (!dead) throw new EventMeshError(ErrorCode.DeadLetterNotFound, 'no such dead letter');
      const kind = CONNECTOR_KINDS.get(current.kind)!;
      const { mesh, config } = opened(current.config, kind, deps.secrets);
      let refused: string | undefined;
      try {
        refused = await deps.jobs.replay(current.id, dead.id, () =>
          replay(kind.role, dead.record, mesh, config, kind, deps),
        );
      } catch (e) {
        // Replayed by a call that ran at the same time (this one waited for its mark), or gone meanwhile.
        if (e instanceof AlreadyReplayedError) throw replayedAlready(dead.id, e.replayedAt);
        if (e instanceof DeadLetterGoneError)
          throw new EventMeshError(ErrorCode.DeadLetterNotFound, 'no such dead letter');
        throw e;
      }
      if (refused !== undefined)
        throw new EventMeshError(
          ErrorCode.InvalidRequest,
          `the dead letter was refused again: ${refused || 'no reason given'}`,
        );
      return [200, { id: dead.id, replayed: true }];
    },
  );
}

/** Replays one dead letter: publishes a source's record (as recorded) or writes a sink's event; answers why it was refused. */
async function replay(
  role: 'source' | 'sink',
  record: unknown,
  mesh: ReturnType<typeof opened>['mesh'],
  config: unknown,
  kind: NonNullable<ReturnType<typeof CONNECTOR_KINDS.get>>,
  deps: JobsRoutesDeps,
): Promise<string | undefined> {
  if (role === 'source') {
    const r = record as { topic?: string; event?: SourceRecord };
    if (!r.topic || !r.event) return 'the row never became an event; fix the row and reset the position';
    const refused = await publish(meshClientOf(deps.meshUrl, mesh), [record as SourceRecord]);
    return refused[0]?.reason;
  }
  const { CloudEvent } = await import('@eventmesh/client');
  const sink = await kind.openSink!(kind.validate(config), { pinHost: (h, p, d) => deps.targets.pinHost(h, p, d) });
  try {
    const [outcome] = await sink.put([
      new CloudEvent(record as Record<string, unknown> & { type: string; source: string }, false),
    ]);
    return outcome.ok ? undefined : outcome.reason;
  } finally {
    await sink.close();
  }
}

function viewOf(j: JobView) {
  return {
    id: j.id,
    name: j.name,
    kind: j.kind,
    tenant: j.tenant,
    state: j.state,
    spec: shown(j.config, CONNECTOR_KINDS.get(j.kind)),
    position: j.position,
    moved: j.moved,
    deadLettered: j.deadLettered,
    throughput: throughputOf(j),
    positionUpdatedAt: j.positionUpdatedAt,
    run: { epoch: j.epoch, owner: j.owner, renewedAt: j.renewedAt, rejectedWrites: j.rejectedWrites },
    lastError: j.lastError,
    lastErrorAt: j.lastErrorAt,
    createdAt: j.createdAt,
    updatedAt: j.updatedAt,
  };
}

/** The dead letters' page size: 1 to 1000 written as digits, 100 when not given. */
function limitOf(value: unknown): number {
  if (value === undefined) return 100;
  const limit = typeof value === 'string' && /^\d{1,4}$/.test(value) ? Number(value) : 0;
  if (limit < 1 || limit > 1000)
    throw new EventMeshError(ErrorCode.InvalidRequest, 'limit: expected a whole number from 1 to 1000', {
      field: 'limit',
    });
  return limit;
}

/** 503 DEPENDENCY_UNAVAILABLE: Temporal did not take a job's workflow start or signal. */
function temporalUnavailable(message: string, cause: unknown, details: Record<string, unknown> = {}): EventMeshError {
  return new EventMeshError(ErrorCode.DependencyUnavailable, message, { dependency: 'temporal', ...details }, true, {
    cause,
  });
}

function throwIt(e: Error): never {
  throw e;
}

function answerError(reply: FastifyReply, e: unknown, log: ReturnType<typeof createLogger>) {
  if (e instanceof ConfigFieldError)
    return reply.code(400).send({ code: ErrorCode.InvalidRequest, message: e.message, field: e.field });
  if (e instanceof EventMeshError) {
    const headers = (e as { headers?: Record<string, string> }).headers ?? {};
    return reply
      .code(HTTP_STATUS_BY_CODE[e.code] ?? 500)
      .headers(headers)
      .send({ code: e.code, message: e.message, ...e.details });
  }
  log.error({ error: (e as Error).message }, 'admin request failed');
  return reply.code(500).send({ code: ErrorCode.Internal, message: 'internal error' });
}

/** 409 DEAD_LETTER_RESOLVED: the letter was replayed already, and is not replayed twice. */
function replayedAlready(id: string, replayedAt: Date): EventMeshError {
  return new EventMeshError(ErrorCode.DeadLetterResolved, `dead letter ${id} was replayed already`, {
    resolution: 'replayed',
    replayedAt: replayedAt.toISOString(),
  });
}
