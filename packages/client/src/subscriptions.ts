import { NotFoundError } from './errors';
import type { Subscription, SubscriptionSpec } from './api-types';
import type { HttpClient } from './http';

/** A filter of the CloudEvents Subscriptions API dialects (`exact`, `prefix`, `suffix`, `all`, `any`, `not`, `sql`). */
export type SubscriptionFilter = Record<string, unknown>;

/** The subscriptions resource of the caller's tenant: `POST|GET /subscriptions`, `GET|PUT|DELETE /subscriptions/{id}`. */
export class Subscriptions {
  constructor(private readonly http: HttpClient) {}

  /** Creates one (201). A webhook's sink is validated by the runtime's handshake first; the answer carries its secret, once. */
  async create(spec: SubscriptionSpec): Promise<Subscription> {
    return this.json<Subscription>({
      method: 'POST',
      path: '/subscriptions',
      body: JSON.stringify(spec),
      idempotent: false,
    });
  }

  /**
   * The tenant's subscription with the same protocol, topic, sink, filters and policy, else a new one. The runtime
   * has no subscription name, so this matches on what the subscription does; two processes ensuring the same spec
   * at the same moment can both create one.
   */
  async ensure(spec: SubscriptionSpec): Promise<Subscription> {
    const found = (await this.list()).find((s) => sameSpec(s, spec));
    return found ?? this.create(spec);
  }

  async get(id: string): Promise<Subscription> {
    return this.json<Subscription>({
      method: 'GET',
      path: `/subscriptions/${encodeURIComponent(id)}`,
      idempotent: true,
    });
  }

  /** The caller's tenant's subscriptions. */
  async list(): Promise<Subscription[]> {
    return this.json<Subscription[]>({ method: 'GET', path: '/subscriptions', idempotent: true });
  }

  /** Replaces `sink`, `filters` and `config` (the topic and `startFrom` are fixed at create). */
  async update(id: string, spec: SubscriptionSpec): Promise<Subscription> {
    return this.json<Subscription>({
      method: 'PUT',
      path: `/subscriptions/${encodeURIComponent(id)}`,
      body: JSON.stringify(spec),
      idempotent: true,
    });
  }

  /** Deletes it and its dead letters; resolves `false` when there was none by that id. */
  async delete(id: string): Promise<boolean> {
    try {
      await this.http.send({ method: 'DELETE', path: `/subscriptions/${encodeURIComponent(id)}`, idempotent: true });
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  private async json<T>(req: Parameters<HttpClient['send']>[0]): Promise<T> {
    const answer = await this.http.send({ ...req, headers: { 'content-type': 'application/json', ...req.headers } });
    return JSON.parse(answer.text) as T;
  }
}

function sameSpec(s: Subscription, spec: SubscriptionSpec): boolean {
  return (
    s.protocol === (spec.protocol ?? 'HTTP') &&
    (spec.topic === undefined || s.topic === spec.topic) &&
    s.sink === spec.sink &&
    JSON.stringify(s.filters) === JSON.stringify(spec.filters ?? []) &&
    ((s.config.policy as string | undefined) ?? 'LOAD_BALANCE') === (spec.config?.policy ?? 'LOAD_BALANCE')
  );
}
