import { NotFoundError } from './errors';
import type { Subscription, SubscriptionOffsets, SubscriptionSpec } from './api-types';
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
   * The tenant's subscription named `spec.name`, made to match `spec` (`PUT /subscriptions/by-name/{name}`): created
   * when the tenant has none of that name; else the same one, its sink, filters and config replaced where `spec`'s
   * differ (its start position stays). Idempotent by name, so retried, and safe from many processes at once: they
   * all get the one subscription. A name held by a subscription of another topic or protocol: `ConflictError`
   * `SUBSCRIPTION_NAME_TAKEN`.
   */
  async ensure(spec: SubscriptionSpec & { name: string }): Promise<Subscription> {
    return this.json<Subscription>({
      method: 'PUT',
      path: `/subscriptions/by-name/${encodeURIComponent(spec.name)}`,
      body: JSON.stringify(spec),
      idempotent: true,
    });
  }

  /** The tenant's subscription named `name`, or undefined when it has none. */
  async byName(name: string): Promise<Subscription | undefined> {
    const [found] = await this.json<Subscription[]>({
      method: 'GET',
      path: `/subscriptions?name=${encodeURIComponent(name)}`,
      idempotent: true,
    });
    return found;
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

  /**
   * Per partition of its topic: the committed offset, the log's start and end, and the lag (events not yet
   * settled), with the partition's owner and epoch (`GET /subscriptions/{id}/offsets`; needs the admin scope).
   */
  async offsets(id: string): Promise<SubscriptionOffsets> {
    return this.json<SubscriptionOffsets>({
      method: 'GET',
      path: `/subscriptions/${encodeURIComponent(id)}/offsets`,
      idempotent: true,
    });
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
