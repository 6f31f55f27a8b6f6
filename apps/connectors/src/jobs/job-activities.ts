import { Context } from '@temporalio/activity';
import { EventMeshClient } from '@eventmesh/client';
import type {
  ConnectorJobActivities,
  ConnectorJobState,
  ConnectorRunProgress,
  ConnectorRunResult,
} from '../../../../contracts';
import { runFenced, StaleEpochError } from '@libs/fence';
import { createLogger } from '@libs/logging';
import type { SecretBox } from '@libs/security';
import { CONNECTOR_KINDS } from '../connectors';
import type { ConnectorKind } from '../spi';
import type { JobRunStore } from '../store/job-run-store';
import type { JobStore } from '../store/job-store';
import { opened, type MeshCredential } from './job-spec';
import type { RunContext } from './run-context';
import { runSink } from './sink-loop';
import { runSource } from './source-loop';
import type { TargetGuard } from './target-guard';

export interface JobActivityDeps {
  jobs: JobStore;
  runs: JobRunStore;
  secrets: SecretBox;
  targets: TargetGuard;
  meshUrl: string;
  replicaId: string;
  /** Aborted when the process shuts down: every run ends and returns. */
  shutdown: AbortSignal;
}

/** The SDK client a job's calls go through, with the job's own credential (its tenant's). */
export function meshClientOf(url: string, credential: MeshCredential): EventMeshClient {
  return new EventMeshClient({
    url,
    apiKey: credential.apiKey,
    token: credential.token,
    // Kept trying while the runtime restarts: a round that gives up is tried again from the committed position.
    retry: { maxAttempts: 20, initialDelayMs: 100, maxDelayMs: 2000 },
  });
}

/**
 * The activities of a connector job's workflow. `runConnectorJob` is the job's loop for one run: it claims the
 * job's next epoch (fencing every earlier run), opens the connector, runs the source or sink loop until `runMs`
 * passed or the workflow cancels it, heartbeating its progress the whole time, and returns its counts. The claim,
 * the heartbeat clock, the renewal (once a second: the job row's `renewed_at`, which `/admin/jobs` shows) and the
 * fenced end are `runFenced`'s (libs/fence): a refused renewal stops the loop as a refused write does.
 */
export function createConnectorJobActivities(deps: JobActivityDeps): ConnectorJobActivities {
  const log = createLogger('ConnectorJob', { replica: deps.replicaId });
  return {
    async recordJobState({ jobId, state }: { jobId: string; state: ConnectorJobState }): Promise<void> {
      await deps.jobs.setState(jobId, state);
    },

    async runConnectorJob({ jobId, runMs }: { jobId: string; runMs: number }): Promise<ConnectorRunResult> {
      const job = await deps.jobs.byId(jobId);
      if (!job) return { epoch: 0, moved: 0, deadLettered: 0, stoppedBy: 'job-gone' };
      const kind = CONNECTOR_KINDS.get(job.kind);
      if (!kind) throw new Error(`job ${jobId}: unknown connector kind ${job.kind}`);
      const progress: ConnectorRunProgress = { epoch: 0, moved: 0, deadLettered: 0 };
      const activity = Context.current();
      const stop = new AbortController();
      let timer: NodeJS.Timeout | undefined;
      const onCancel = () => stop.abort('cancelled');
      activity.cancellationSignal.addEventListener('abort', onCancel);
      deps.shutdown.addEventListener('abort', onCancel);
      try {
        return await runFenced<ConnectorRunResult>({
          scope: { kind: 'connector-job', jobId },
          log: { warn: (message, fields) => log.warn(fields, message) },
          claim: () => deps.runs.claim(jobId, deps.replicaId),
          fenceFor: (epoch) => deps.runs.fenceFor(jobId, epoch),
          open({ epoch, fence, stop: runStop, fencedOff }) {
            progress.epoch = epoch;
            timer = setTimeout(() => stop.abort('deadline'), runMs);
            activity.heartbeat(progress);
            const { mesh, config } = opened(job.config, kind, deps.secrets);
            const ctx: RunContext = {
              jobId,
              fence,
              runs: deps.runs,
              jobs: deps.jobs,
              mesh: meshClientOf(deps.meshUrl, mesh),
              log,
              signal: runStop,
              fencedOff,
              progress,
            };
            log.info({ jobId, kind: job.kind, tenant: job.tenant, epoch }, 'connector job run started');
            return {
              heartbeat: () => activity.heartbeat(progress),
              run: async () => {
                try {
                  await runJob(kind, config, ctx, deps.targets);
                } catch (e) {
                  if (!(e instanceof StaleEpochError)) {
                    progress.lastError = (e as Error).message;
                    await deps.jobs.setLastError(jobId, progress.lastError).catch(() => undefined);
                  }
                  throw e;
                }
                return { ...progress, stoppedBy: stop.signal.reason === 'deadline' ? 'deadline' : 'cancelled' };
              },
            };
          },
          stop: stop.signal,
          beatEveryMs: 1000,
          renewal: { renew: (epoch) => deps.runs.renew(jobId, epoch), everyMs: 1000, meansAlive: true },
          fenced({ epoch, message }) {
            // Another run holds the job (a takeover, a reset): this one's writes are refused; it ends here.
            log.warn({ jobId, epoch, error: message }, 'connector job run fenced off; stopping');
            return { ...progress, stoppedBy: 'cancelled' };
          },
        });
      } finally {
        clearTimeout(timer);
        activity.cancellationSignal.removeEventListener('abort', onCancel);
        deps.shutdown.removeEventListener('abort', onCancel);
      }
    },
  };
}

/** Opens the job's connector and runs its source or sink loop until the run's signal stops it. */
async function runJob(
  kind: ConnectorKind<unknown>,
  config: unknown,
  ctx: RunContext,
  targets: TargetGuard,
): Promise<void> {
  const validated = kind.validate(config);
  const connector = { pinHost: (h: string, p: number, d: string) => targets.pinHost(h, p, d) };
  if (kind.role === 'source') {
    const source = await kind.openSource!(validated, connector);
    try {
      await runSource(source, (validated as { batchSize?: number }).batchSize ?? 500, ctx);
    } finally {
      await source.close();
    }
  } else {
    const sink = await kind.openSink!(validated, connector);
    try {
      await runSink(sink, kind.subscriptionOf!(validated), ctx);
    } finally {
      await sink.close();
    }
  }
}
