import type { EventMeshClient } from '@eventmesh/client';
import type { ConnectorRunProgress } from '../../../../contracts';
import type { WriteFence } from '@libs/fence';
import type { Logger } from '@libs/logging';
import type { JobRunStore } from '../store/job-run-store';
import type { JobStore } from '../store/job-store';

/** What one run of a job works with: its fence, its stores, its mesh client, and when it must stop. */
export interface RunContext {
  jobId: string;
  fence: WriteFence;
  runs: JobRunStore;
  jobs: JobStore;
  mesh: EventMeshClient;
  log: Logger;
  /**
   * Set when the run must end: its deadline passed, the workflow cancelled it (pause, restart), the process stops,
   * or its renewal was refused (then `fencedOff` is set too).
   */
  signal: AbortSignal;
  /** Set when the run's renewal was refused: another run holds the job, and this one's unanswered work is theirs. */
  fencedOff: AbortSignal;
  /** What the run reports in its heartbeats and its result; the loops update it. */
  progress: ConnectorRunProgress;
}

/** Waits `ms`, or less when the run is told to stop. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** The delay before the next try after `failures` failed rounds in a row: 500 ms doubling to 10 s. */
export const backoffMs = (failures: number) => Math.min(10000, 500 * 2 ** Math.min(failures - 1, 5));

/** Records a round's error as the job's last error (once per change), for `/admin/jobs` and the heartbeats. */
export async function noteError(ctx: RunContext, error: string | undefined): Promise<void> {
  if (ctx.progress.lastError === error) return;
  ctx.progress.lastError = error;
  await ctx.jobs.setLastError(ctx.jobId, error ?? null).catch(() => undefined);
  if (error) ctx.log.warn({ jobId: ctx.jobId, epoch: ctx.progress.epoch, error }, 'connector round failed; retrying');
}
