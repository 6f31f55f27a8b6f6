import type { FastifyRequest } from 'fastify';
import type { SecretBox } from '@libs/security';
import { CONNECTOR_KINDS } from '../connectors';
import { meshClientOf } from '../jobs/job-activities';
import { opened } from '../jobs/job-spec';
import type { TargetGuard } from '../jobs/target-guard';
import type { JobView } from '../store/job-store';

/** What reading a job's lag needs: its secrets opened, its target checked, the event runtime's address. */
export interface LagDeps {
  secrets: SecretBox;
  targets: TargetGuard;
  meshUrl: string;
}

/** A job's lag: how many events wait for it, and what that number counts; `error` when it could not be read. */
export interface JobLag {
  events: number | null;
  counts: string;
  error?: string;
}

/** A job's throughput: the events its runs moved in the last 60 s (their fenced commits' counts), per second. */
export function throughputOf(job: JobView): { eventsPerSecond: number; window: string } {
  return { eventsPerSecond: Math.round((job.movedLastMinute / 60) * 100) / 100, window: 'last 60 s' };
}

/**
 * A job's lag, read when asked. A source: what the connector counts past the committed position (the outbox: its
 * rows after the position, in commit order, including rows of transactions still open). A sink: its subscription's
 * events not yet settled, summed over the partitions, as the event runtime reports them
 * (`GET /subscriptions/{id}/offsets`), read with the caller's own credential (that route needs the admin scope, as
 * this one does), so what an operator sees here is what the runtime shows them.
 */
export async function lagOf(job: JobView, req: FastifyRequest, deps: LagDeps): Promise<JobLag> {
  const kind = CONNECTOR_KINDS.get(job.kind);
  const counts =
    kind?.role === 'sink'
      ? "the subscription's events not yet acknowledged (the runtime's lag, all partitions)"
      : 'source records after the committed position';
  if (!kind) return { events: null, counts, error: `unknown connector kind ${job.kind}` };
  try {
    const { config } = opened(job.config, kind, deps.secrets);
    const validated = kind.validate(config);
    if (kind.role === 'sink') {
      const offsets = await meshClientOf(deps.meshUrl, callerCredential(req)).subscriptions.offsets(
        kind.subscriptionOf!(validated),
      );
      return { events: offsets.partitions.reduce((n, p) => n + p.lag, 0), counts };
    }
    const source = await kind.openSource!(validated, { pinHost: (h, p, d) => deps.targets.pinHost(h, p, d) });
    try {
      if (!source.lag) return { events: null, counts, error: 'this connector does not count its lag' };
      return { events: await source.lag(job.position ?? undefined), counts };
    } finally {
      await source.close();
    }
  } catch (e) {
    return { events: null, counts, error: (e as Error).message };
  }
}

/** The admin caller's credential as it came (a bearer token or an API key), to ask the event runtime with it. */
function callerCredential(req: FastifyRequest): { apiKey?: string; token?: string } {
  const apiKey = req.headers['x-api-key'];
  const auth = req.headers.authorization;
  return {
    apiKey: typeof apiKey === 'string' ? apiKey : undefined,
    token: typeof auth === 'string' && auth.startsWith('Bearer ') ? auth.slice(7) : undefined,
  };
}
