import { ErrorCode, EventMeshError } from '@libs/errors';
import type { SubscriptionView } from './subscription.schema';
import { configView, SubscriptionCaller, SubscriptionService, subscriptionNameTaken } from './subscription.service';

/** What an ensure did: created the subscription, or found it (and replaced its sink, filters or config if they differed). */
export interface EnsuredSubscription {
  created: boolean;
  subscription: SubscriptionView;
}

/**
 * `PUT /subscriptions/by-name/{name}`: the tenant's subscription of that name, made to match `body`. Absent, it is
 * created (as by a POST, the name set); present, with the same topic and protocol, its sink, filters and config
 * are replaced when they differ from the body's (as by a PUT by id; its start position stays the one it was
 * created with); with another topic or protocol, 409 SUBSCRIPTION_NAME_TAKEN. Idempotent by name: every process
 * of an app that ensures at once ends with the one subscription (the unique index on (tenant, name) lets one
 * create through; the others find it).
 */
export async function ensureSubscription(
  subscriptions: SubscriptionService,
  name: string,
  body: unknown,
  caller: SubscriptionCaller,
): Promise<EnsuredSubscription> {
  const spec = namedSpec(body, name);
  let current = await subscriptions.findByName(name, caller.tenant);
  if (!current) {
    try {
      return { created: true, subscription: await subscriptions.create(spec, caller) };
    } catch (e) {
      // Another ensure of the name created it first: answer that one.
      const raced =
        e instanceof EventMeshError && e.code === ErrorCode.SubscriptionNameTaken
          ? await subscriptions.findByName(name, caller.tenant)
          : undefined;
      if (!raced) throw e;
      current = raced;
    }
  }
  const wanted = subscriptions.parse(spec);
  if (wanted.topic !== current.topic || wanted.protocol !== current.protocol)
    throw subscriptionNameTaken(name, current.id);
  const { startFrom: _startFrom, ...config } = wanted.config;
  const same =
    wanted.sink === current.sink &&
    canonical(wanted.filters) === canonical(current.filters) &&
    canonical(configView(wanted.protocol, { ...config, startFrom: current.config.startFrom })) ===
      canonical(current.config);
  if (same) return { created: false, subscription: current };
  const { config: _asked, ...rest } = spec;
  return { created: false, subscription: await subscriptions.replace(current.id, { ...rest, config }, caller) };
}

/** The body with its name: a body naming another name than the path's is refused. */
function namedSpec(body: unknown, name: string): Record<string, unknown> & { config?: unknown } {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new EventMeshError(
      ErrorCode.InvalidRequest,
      'body: expected a JSON object, the subscription as it is to be',
      {
        field: 'body',
      },
    );
  const given = (body as { name?: unknown }).name;
  if (given !== undefined && given !== name)
    throw new EventMeshError(ErrorCode.InvalidRequest, 'name: the body names another subscription than the path', {
      field: 'name',
    });
  return { ...(body as Record<string, unknown>), name };
}

/** JSON with object keys sorted: Postgres' jsonb keeps its own key order, so a stored value compares by content. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}
