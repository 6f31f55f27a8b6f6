import { z } from 'zod';
import { DEFAULT_DELIVERY_RETRY, DeliveryRetryPolicy } from '../../../contracts';
import { ErrorCode, EventMeshError } from '@libs/errors';

/**
 * The A2A extension an agent's card names its task policy with: `capabilities.extensions[]` holds
 * `{ uri: TASK_POLICY_EXTENSION, params: { timeoutMs, retry: { initialIntervalMs, backoffCoefficient,
 * maximumIntervalMs, maximumAttempts } } }`, every field optional (docs/a2a.md#task-policy).
 */
export const TASK_POLICY_EXTENSION = 'urn:eventmesh:a2a:task-policy:v1';

/** A task's deadline at most a week: the workflow's timers and the blocking sends are bounded by it. */
const MAX_TIMEOUT_MS = 7 * 24 * 3600 * 1000;
const intervalMs = z
  .number()
  .int()
  .min(100)
  .max(3600 * 1000);

const taskPolicySchema = z.strictObject({
  timeoutMs: z.number().int().min(1000).max(MAX_TIMEOUT_MS).optional(),
  retry: z
    .strictObject({
      initialIntervalMs: intervalMs.optional(),
      backoffCoefficient: z.number().min(1).max(10).optional(),
      maximumIntervalMs: intervalMs.optional(),
      maximumAttempts: z.number().int().min(0).max(1000).optional(),
    })
    .optional(),
});

/** What the mesh applies to each task of an agent: its deadline and how its delivery is tried again. */
export interface TaskPolicy {
  timeoutMs: number;
  retry: DeliveryRetryPolicy;
}

type Card = { capabilities?: Record<string, unknown> };

/**
 * The task policy an agent's card names, on top of the defaults (EVENTMESH_AGENTS_TASK_TIMEOUT_MS and
 * {@link DEFAULT_DELIVERY_RETRY}); a 400 `INVALID_AGENT_CARD` naming the field when the extension is malformed.
 * Called at registration (nothing bad is stored) and at each send.
 */
export function taskPolicyOf(card: Card, defaultTimeoutMs: number): TaskPolicy {
  const declared = card.capabilities?.extensions;
  const extensions: unknown[] = Array.isArray(declared) ? declared : [];
  const at = extensions.findIndex((e) => (e as { uri?: unknown } | null)?.uri === TASK_POLICY_EXTENSION);
  if (at === -1) return { timeoutMs: defaultTimeoutMs, retry: DEFAULT_DELIVERY_RETRY };
  const parsed = taskPolicySchema.safeParse((extensions[at] as { params?: unknown }).params ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = ['capabilities', 'extensions', at, 'params', ...issue.path].join('.');
    throw new EventMeshError(ErrorCode.InvalidAgentCard, `${field}: ${issue.message}`, { field });
  }
  const retry = { ...DEFAULT_DELIVERY_RETRY, ...parsed.data.retry };
  if (retry.maximumIntervalMs < retry.initialIntervalMs) {
    const field = `capabilities.extensions.${at}.params.retry.maximumIntervalMs`;
    throw new EventMeshError(
      ErrorCode.InvalidAgentCard,
      `${field}: must be at least initialIntervalMs (${retry.initialIntervalMs})`,
      { field },
    );
  }
  return { timeoutMs: parsed.data.timeoutMs ?? defaultTimeoutMs, retry };
}
