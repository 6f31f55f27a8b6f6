import { randomUUID } from 'node:crypto';
import { EventMeshClient } from '@eventmesh/client';
import type { Client } from 'pg';
import { until } from './support';

/** Where bench:connectors' jobs read and write: the application database, as a job's config names it. */
export interface AppConnection {
  host: string;
  port: number;
  database: string;
  user: string;
  password: string;
}

/**
 * What bench:connectors works with besides its arms: the application database's outbox and sink tables, the
 * connector runtime's jobs over its admin API, and publishes through the SDK to the benchmark's topic.
 */
export class ConnectorsFixture {
  private tables = 0;
  /** Each sink job's subscription, deleted with the job. */
  private readonly subscriptionOf = new Map<string, string>();

  constructor(
    readonly db: Client,
    private readonly connectorsUrl: string,
    private readonly instanceUrl: string,
    readonly mesh: EventMeshClient,
    readonly topic: string,
    /** The run's own schema in the application database: its tables and the sink's ledger, dropped at the end. */
    private readonly schema: string,
    private readonly connection: AppConnection,
    /** Rows a job reads, and events the SDK publishes, at a time. */
    private readonly batch: number,
  ) {}

  /** A call of the connector runtime's admin API; its JSON answer, refused past a 2xx. */
  async api(method: string, url: string, body?: unknown) {
    const res = await fetch(`${this.connectorsUrl}${url}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text}`);
    return text ? (JSON.parse(text) as { id: string; moved: number; run: { epoch: number | null } }) : undefined;
  }

  /** A new outbox table with the (txid, id) index the outbox job reads by. */
  async outbox(): Promise<string> {
    const table = `${this.schema}.outbox_${++this.tables}`;
    await this.db.query(`CREATE TABLE ${table} (
      id bigserial PRIMARY KEY, txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
      aggregatetype text, aggregateid text, type text, payload jsonb)`);
    await this.db.query(`CREATE INDEX ON ${table} (txid, id)`);
    return table;
  }

  /**
   * A new sink table; each row's `written_at` is its insert's clock. `identified`: with the event's source beside
   * its id and a unique index on the two, the table a `dedupe: table` sink writes (and its baseline's).
   */
  async sinkTable(identified = false): Promise<string> {
    const table = `${this.schema}.orders_${++this.tables}`;
    await this.db.query(
      identified
        ? `CREATE TABLE ${table} (event_source text, event_id text, order_id int, at double precision,
             written_at timestamptz DEFAULT clock_timestamp(), UNIQUE (event_source, event_id))`
        : `CREATE TABLE ${table} (event_id text, order_id int, at double precision, written_at timestamptz DEFAULT clock_timestamp())`,
    );
    return table;
  }

  /** Outbox rows `from` to `from + count - 1` in one statement, each stamped with its insert's clock. */
  insertRows(table: string, from: number, count: number) {
    return this.db.query(
      `INSERT INTO ${table} (aggregatetype, aggregateid, type, payload)
       SELECT 'order', (o % 64)::text, 'order.created',
              jsonb_build_object('orderId', o, 'at', extract(epoch FROM clock_timestamp()) * 1000)
         FROM generate_series($1::int, $2::int) o`,
      [from, from + count - 1],
    );
  }

  async rowsIn(table: string): Promise<number> {
    return Number((await this.db.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
  }

  /** An outbox job reading `table` into the benchmark's topic; its id. */
  async outboxJob(table: string): Promise<string> {
    return (await this.api('POST', '/admin/jobs', {
      name: table.replace(/[_.]/g, '-'),
      kind: 'postgres-outbox',
      config: { connection: this.connection, table, topicTemplate: this.topic, batchSize: this.batch },
    }))!.id;
  }

  /**
   * A table sink job writing the topic's events into `table`, once it runs and its stream is open; its id.
   * `dedupe: 'table'` for a table of {@link sinkTable}(true).
   */
  async sinkJob(table: string, dedupe: 'ledger' | 'table' = 'ledger'): Promise<string> {
    const sub = (await this.mesh.subscriptions.create({
      protocol: 'STREAM',
      topic: this.topic,
      // Batched, as docs/connectors.md advises for a sink job: a delivery of up to 500 events per partition at once.
      config: { ackTimeoutMs: 5000, batch: { maxEvents: 500 } },
    } as never)) as { id: string };
    const id = (await this.api('POST', '/admin/jobs', {
      name: table.replace(/[_.]/g, '-'),
      kind: 'postgres-table',
      config: {
        subscriptionId: sub.id,
        connection: this.connection,
        table,
        columns: {
          ...(dedupe === 'table' ? { event_source: 'source' } : {}),
          event_id: 'id',
          order_id: 'data.orderId',
          at: 'data.at',
        },
        dedupe,
      },
    }))!.id;
    this.subscriptionOf.set(id, sub.id);
    await until(
      'the sink job runs',
      async () => (await this.api('GET', `/admin/jobs/${id}`))!.run.epoch ?? undefined,
      60000,
    );
    // Its stream open on the instance, as the group arm waits for its group to join.
    await until(
      "the sink job's stream is open",
      async () => {
        const res = await fetch(`${this.instanceUrl}/subscriptions/${sub.id}/clients`);
        const body = (await res.json()) as { clients?: unknown[] };
        return (body.clients?.length ?? 0) > 0 || undefined;
      },
      60000,
    );
    return id;
  }

  /**
   * Deletes a job, and a sink job's subscription with it: a subscription left without its client would go on taking
   * the topic's events in the instance through the next arms' runs.
   */
  async deleteJob(id: string): Promise<void> {
    await this.api('DELETE', `/admin/jobs/${id}`);
    const subscriptionId = this.subscriptionOf.get(id);
    if (subscriptionId) await this.mesh.subscriptions.delete(subscriptionId);
    this.subscriptionOf.delete(id);
  }

  /** `count` events (order ids from `from`) published through the SDK to the topic, `batch` a request. */
  async publishAll(from: number, count: number): Promise<void> {
    for (let i = 0; i < count; i += this.batch)
      await this.mesh.publishMany(
        Array.from({ length: Math.min(this.batch, count - i) }, (_, k) => ({
          id: randomUUID(),
          type: 'order.created',
          source: '/bench',
          data: { orderId: from + i + k, at: Date.now() },
        })) as never,
        { topic: this.topic },
      );
  }
}
