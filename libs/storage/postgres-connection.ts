import { Client, ClientConfig } from 'pg';
import type { EventMeshConfig } from '@libs/config';

/** How long a connection attempt (and, in the pool, a wait for a free connection) may take. */
export const POSTGRES_CONNECT_TIMEOUT_MS = 5000;
/** Idle time before TCP keepalive probes start on a connection (the operating system's settings do the rest). */
export const POSTGRES_KEEPALIVE_DELAY_MS = 10000;
/** How long after the server's statement timeout a client still waits for an answer before it drops the link. */
export const POSTGRES_DEADLINE_GRACE_MS = 1000;

/**
 * A query's answer did not come within its deadline; its connection was dropped. Coded `ETIMEDOUT`: Postgres is
 * unreachable from here ({@link isPostgresUnavailable}), not a bad query.
 */
export class QueryDeadlineError extends Error {
  readonly code = 'ETIMEDOUT';
  constructor(deadlineMs: number) {
    super(
      `no answer from Postgres within ${deadlineMs} ms (EVENTMESH_POSTGRES_QUERY_TIMEOUT_MS plus ${POSTGRES_DEADLINE_GRACE_MS} ms); its connection was dropped`,
    );
    this.name = 'QueryDeadlineError';
  }
}

/** How long a connection is given to answer a probe once another connection of its pool was found on a dead link. */
export const POSTGRES_PROBE_TIMEOUT_MS = 2000;
/**
 * A connection that has heard nothing from the server for longer than this is probed (`SELECT 1`, under the probe
 * deadline) before its next statement, as HikariCP validates a connection idle past its `aliveBypassWindowMs`.
 */
export const POSTGRES_IDLE_PROBE_AFTER_MS = 1000;

/**
 * A pg client whose every query has a deadline. The server ends a statement after `statement_timeout` and answers
 * with an error; a client that has heard nothing a grace after that is talking into a dead link (a half-open
 * connection: packets dropped, no RST, which no socket error ever reports), so it rejects the query and destroys
 * the connection: the client emits `error`, and the pool (TypeORM releases a connection with its error) drops it
 * rather than lend it again. Without this, a statement sent into such a link waits for good, and so does whatever
 * awaits it (a dispatch loop, an offset commit, a lease renewal), holding its pool connection.
 *
 * A dead link is seldom alone: a network partition or a lost NAT entry strands every connection opened over the
 * same path. So when one connection misses its deadline, every other open connection of the same pool with no
 * query in flight is probed at once (`SELECT 1`, {@link POSTGRES_PROBE_TIMEOUT_MS}), and one that does not answer
 * is dropped the same way (an idle connection leaves the pool on its `error`). Without the probe, the pool lends
 * its stranded idle connections one after another and each costs a full deadline; with it, the pool's dead
 * connections are all gone about one probe after the first deadline. Connections with a query in flight meet their
 * own deadlines.
 *
 * The probe cannot reach a connection that is lent before the first deadline: its statement is in flight on the dead
 * link and costs a full deadline too (in the half-open case, a new dispatch attempt's claim did, and delivery
 * resumed 16 s after the black hole instead of 10). So a connection that has heard nothing for
 * {@link POSTGRES_IDLE_PROBE_AFTER_MS} is probed before its next statement, the probe queued just ahead of it (in
 * order: a statement is never sent before one queued earlier): a dead one is dropped at the probe deadline and the
 * statement fails with it. A busy connection is never probed; an idle one pays one round trip.
 *
 * Queries in promise and callback form are bounded; a submittable (a cursor or stream, none in the runtime) is not.
 */
export function deadlineClient(deadlineMs: number): typeof Client {
  const probeMs = Math.min(POSTGRES_PROBE_TIMEOUT_MS, deadlineMs);
  /** The connected, not yet ended clients of this pool (one class per pool). */
  const open = new Set<DeadlineClient>();

  class DeadlineClient extends Client {
    private inFlight = 0;
    /** When the server was last heard from on this connection (connected, or a statement answered). */
    private heardAt = Date.now();

    constructor(config?: string | ClientConfig) {
      super(config);
      this.once('connect', () => {
        this.heardAt = Date.now();
        open.add(this);
      });
      this.once('end', () => open.delete(this));
    }

    // pg's query has many overloads; this one forwards them all.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    override query(...args: any[]): any {
      const last: unknown = args[args.length - 1];
      if (typeof last === 'function') {
        const callback = last as (err: Error | null, result?: unknown) => void;
        (this.query(...args.slice(0, -1)) as Promise<unknown>).then(
          (r) => callback(null, r),
          (e: Error) => callback(e),
        );
        return undefined;
      }
      if (this.inFlight === 0 && Date.now() - this.heardAt > POSTGRES_IDLE_PROBE_AFTER_MS) this.probe();
      const result: unknown = (super.query as (...a: unknown[]) => unknown).apply(this, args);
      if (!(result instanceof Promise)) return result;
      return this.bounded(result, deadlineMs);
    }

    private bounded<T>(result: Promise<T>, ms: number): Promise<T> {
      this.inFlight++;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          // Rejected once the client has reported the connection lost (its `error`, on the stream's close), so
          // that the pool has dropped it before the caller, seeing the rejection, releases it or asks for another.
          open.delete(this);
          const stream = this.connection.stream;
          stream.once('close', () => reject(new QueryDeadlineError(ms)));
          stream.destroy();
          for (const sibling of open) if (sibling.inFlight === 0) sibling.probe();
        }, ms);
        result.then(
          (r) => {
            clearTimeout(timer);
            this.inFlight--;
            this.heardAt = Date.now();
            resolve(r);
          },
          (e: unknown) => {
            clearTimeout(timer);
            this.inFlight--;
            reject(e);
          },
        );
      });
    }

    /** A `SELECT 1` under the probe deadline; a connection that misses it is dropped like any other. */
    private probe(): void {
      const result = (super.query as (text: string) => Promise<unknown>).call(this, 'SELECT 1');
      this.bounded(result, probeMs).catch(() => undefined);
    }
  }
  return DeadlineClient;
}

/**
 * The settings of every connection the runtime opens to Postgres (the pool's and the reply listener's), in one
 * place: TCP keepalive, a connection timeout, the server's `statement_timeout` and
 * `idle_in_transaction_session_timeout` at `queryTimeoutMs` (a session whose client vanished inside a transaction
 * releases its locks), and the client-side deadline of {@link deadlineClient} a grace later. `queryTimeoutMs` 0:
 * none of the three timeouts (migrations, which may run long).
 */
export function postgresConnectionOptions(
  pg: EventMeshConfig['postgres'],
  applicationName: string,
): ClientConfig & { Client?: typeof Client } {
  const bounded = pg.queryTimeoutMs > 0;
  return {
    host: pg.host,
    port: pg.port,
    user: pg.user,
    password: pg.password,
    database: pg.database,
    application_name: applicationName,
    keepAlive: true,
    keepAliveInitialDelayMillis: POSTGRES_KEEPALIVE_DELAY_MS,
    connectionTimeoutMillis: POSTGRES_CONNECT_TIMEOUT_MS,
    ...(bounded && {
      statement_timeout: pg.queryTimeoutMs,
      idle_in_transaction_session_timeout: pg.queryTimeoutMs,
      Client: deadlineClient(pg.queryTimeoutMs + POSTGRES_DEADLINE_GRACE_MS),
    }),
  };
}

/** A client for one long-lived connection (the reply listener's LISTEN), with the settings above. */
export function createPostgresClient(pg: EventMeshConfig['postgres'], applicationName: string): Client {
  const { Client: ClientClass = Client, ...options } = postgresConnectionOptions(pg, applicationName);
  return new ClientClass(options);
}
