import type { Client as TemporalClient } from '@temporalio/client';
import { a2aTaskWorkflowIdOf } from '../contracts';
import { median } from './support';

/**
 * Where a mesh task's time goes in `npm run bench:a2a` (bench/a2a.bench.ts): its workflow `a2a-task/<id>`'s history
 * read back as a timeline (Temporal's own event times), the median over a sample of tasks, and its time waiting for a
 * worker and running in one.
 */

export interface Step {
  label: string;
  ms: number;
}

/** One task workflow's history as a timeline: each event's time after the workflow's start. */
async function timelineOf(temporal: TemporalClient, taskId: string): Promise<Step[]> {
  const history = await temporal.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).fetchHistory();
  const events = history.events ?? [];
  const at = (e: (typeof events)[number]) => Number(e.eventTime?.seconds ?? 0) * 1000 + (e.eventTime?.nanos ?? 0) / 1e6;
  const start = at(events[0]);
  return events.map((e) => ({ label: eventName(e.eventType), ms: at(e) - start }));
}

function eventName(type: unknown): string {
  // EventType enum numbers of temporal.api.enums.v1 (the ones a task workflow's history holds).
  const names: Record<number, string> = {
    1: 'workflow started',
    2: 'workflow completed',
    5: 'workflow task scheduled',
    6: 'workflow task started',
    7: 'workflow task completed',
    10: 'activity scheduled',
    11: 'activity started',
    12: 'activity completed',
    13: 'activity failed',
    17: 'timer started (the task deadline)',
    18: 'timer fired',
    19: 'timer canceled',
    25: 'marker recorded (the local activity: the first attempt)',
    40: 'search attributes upserted',
  };
  return names[Number(type)] ?? `event ${String(type)}`;
}

/** The median timeline of the sampled tasks whose histories have the most common shape. */
export async function medianTimeline(
  temporal: TemporalClient,
  taskIds: string[],
): Promise<{ steps: Step[]; of: number; sampled: number }> {
  const timelines = await Promise.all(taskIds.map((id) => timelineOf(temporal, id).catch(() => undefined)));
  const shapes = new Map<string, Step[][]>();
  for (const t of timelines) {
    if (!t) continue;
    const key = t.map((s) => s.label).join('|');
    shapes.set(key, [...(shapes.get(key) ?? []), t]);
  }
  const [common] = [...shapes.values()].sort((a, b) => b.length - a.length);
  if (!common) return { steps: [], of: 0, sampled: taskIds.length };
  return {
    steps: common[0].map((s, i) => ({ label: s.label, ms: median(common.map((t) => t[i].ms)) })),
    of: common.length,
    sampled: taskIds.length,
  };
}

/** A timeline's time waiting for a worker (scheduled to started) and running (started to completed), by kind. */
export function summarize(steps: Step[]): {
  queued: number;
  workflowTaskRun: number;
  activityRun: number;
  workflowTasks: number;
  activities: number;
} {
  const out = { queued: 0, workflowTaskRun: 0, activityRun: 0, workflowTasks: 0, activities: 0 };
  let scheduled: Record<string, number> = {};
  let startedAt: Record<string, number> = {};
  for (const s of steps) {
    const kind = s.label.startsWith('workflow task')
      ? 'workflowTask'
      : s.label.startsWith('activity')
        ? 'activity'
        : undefined;
    if (!kind) continue;
    if (s.label.endsWith('scheduled')) scheduled = { ...scheduled, [kind]: s.ms };
    else if (s.label.endsWith('started')) {
      out.queued += s.ms - (scheduled[kind] ?? s.ms);
      startedAt = { ...startedAt, [kind]: s.ms };
    } else if (s.label.endsWith('completed')) {
      if (kind === 'workflowTask') {
        out.workflowTaskRun += s.ms - (startedAt[kind] ?? s.ms);
        out.workflowTasks++;
      } else {
        out.activityRun += s.ms - (startedAt[kind] ?? s.ms);
        out.activities++;
      }
    }
  }
  return out;
}
