import type { Client } from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EventMeshConfig } from '@libs/config';
import { createLogger } from '@libs/logging';
import { reasonOf, withDeadline } from '@libs/runtime';
import { createPostgresClient } from '@libs/storage';

/** The first key of every liveness lock ('EVMH'); the second is `hashtext(instance id)`. */
export const LIVENESS_LOCK_CLASS = 0x45564d48;

/** The liveness locks of this database's partition owners, held by a session now. */
const HELD = `SELECT 1 FROM pg_locks k
   WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
     AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND k.classid = $1::int4::oid AND k.objid = hashtext(l.owner)::oid`;

/**
 * The liveness timing for a lease TTL: confirmed four times a window, the window a second (a quarter TTL when
 * that is shorter), so a crash is acted on within about a second and a quarter, against the TTL's ten.
 */
export function livenessTimingFor(leaseTtlMs: number): { everyMs: number; windowMs: number } {
  const windowMs = Math.min(1000, Math.floor(leaseTtlMs / 4));
  return { everyMs: Math.max(50, Math.floor(windowMs / 4)), windowMs };
}

export interface LivenessLockOptions {
  instanceId: string;
  /** How often the session is confirmed (and the peers' locks read). */
  everyMs: number;
  /** How long a confirmation counts, from when it was asked; a peer waits this long before it acts on a crash. */
  windowMs: number;
}

/**
 * The instance's liveness in PARTITION_OWNED_PULL, as Postgres sees it: a session-level advisory lock on a
 * connection of its own, keyed by the instance id. Postgres releases it the moment the session ends, and a crashed
 * process's sessions end at once (the kernel closes its sockets), so a released lock is a crash known in
 * milliseconds, where the lease's heartbeat timeout waits out a TTL. A paused process or a silently cut link keeps
 * its session, and so its lock: those stay with the TTL.
 *
 * The lock is part of the lease: {@link confirmed} is true only while a statement on the session, asked within
 * `windowMs`, was answered. The partition loops neither fetch nor deliver otherwise (OwnershipAgent), so an owner
 * whose session ended (a network blip, the server ending it) holds within `windowMs`, and a peer that finds the
 * lock released waits that long, holding the lock itself, before it starts the takeover (crash-watch.ts).
 *
 * Every confirmation also reads which partition owners (`partition_leases.owner`) hold no liveness lock: the
 * peers' crashes, handed to {@link onReleased}.
 */
export class LivenessLock {
  private readonly log = createLogger('LivenessLock');
  private client?: Client;
  /** The backend of the last session that held the lock (ended when it is found still holding it after a reconnect). */
  private previousPid?: number;
  private confirmedAt = 0;
  private acquired = 0;
  private readonly stopped = new AbortController();
  private loop?: Promise<void>;
  /** The statement on the session asked last (settled or not). */
  private queue: Promise<unknown> = Promise.resolve();
  /** Hears the partition owners, other than this instance, whose liveness lock no session holds. */
  onReleased: (owners: string[]) => void = () => undefined;

  constructor(
    private readonly pg: EventMeshConfig['postgres'],
    private readonly options: LivenessLockOptions,
  ) {}

  /** Takes the lock (waiting at most `waitMs` for it), then keeps it confirmed in the background. */
  async start(waitMs: number): Promise<void> {
    const deadline = Date.now() + waitMs;
    while (!(await this.acquire()) && Date.now() < deadline) await sleep(this.options.everyMs);
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.loop;
    await this.drop();
  }

  /** The session holds the lock, confirmed by a statement asked within the window. */
  confirmed(): boolean {
    return this.client !== undefined && Date.now() - this.confirmedAt < this.options.windowMs;
  }

  /** When the session holding the lock now took it (epoch ms; 0 when none holds it). */
  acquiredAt(): number {
    return this.client ? this.acquired : 0;
  }

  /** How long the session holding the lock has held it (0 when none). */
  heldForMs(): number {
    return this.client ? Date.now() - this.acquired : 0;
  }

  /** Takes another instance's liveness lock on this session: true when its session was gone (a crash). */
  async lockPeer(instanceId: string): Promise<boolean> {
    const rows = await this.query<{ locked: boolean }>(
      'SELECT pg_try_advisory_lock($1::int4, hashtext($2)) AS locked',
      [LIVENESS_LOCK_CLASS, instanceId],
    );
    return rows?.[0]?.locked === true;
  }

  async unlockPeer(instanceId: string): Promise<void> {
    await this.query('SELECT pg_advisory_unlock($1::int4, hashtext($2))', [LIVENESS_LOCK_CLASS, instanceId]);
  }

  /**
   * A statement on the session holding the lock (undefined when none does), after those asked before it: a pg
   * client runs one statement at a time, and the confirmations and the peers' locks share the session.
   */
  private query<R extends object>(sql: string, params: unknown[]): Promise<R[] | undefined> {
    const client = this.client;
    if (!client) return Promise.resolve(undefined);
    const result = this.queue.then(async () => (await client.query<R>(sql, params)).rows);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private async run(): Promise<void> {
    while (!this.stopped.signal.aborted) {
      await sleep(this.options.everyMs, undefined, { signal: this.stopped.signal }).catch(() => undefined);
      if (this.stopped.signal.aborted) break;
      if (!this.client) {
        await this.acquire();
        continue;
      }
      const askedAt = Date.now();
      try {
        const rows = await this.query<{ owner: string }>(
          `SELECT DISTINCT l.owner FROM partition_leases l
            WHERE l.owner IS NOT NULL AND l.owner <> $2 AND NOT EXISTS (${HELD})`,
          [LIVENESS_LOCK_CLASS, this.options.instanceId],
        );
        if (!rows) continue;
        // Counted from the question: an answer that waited out a pause is not fresh.
        this.confirmedAt = askedAt;
        if (rows.length > 0) this.onReleased(rows.map((r) => r.owner));
      } catch (e) {
        this.log.warn({ error: reasonOf(e) }, 'liveness session lost; partition loops hold until it is taken again');
        await this.drop();
      }
    }
  }

  /** One attempt to open a session and take the lock; true when held. */
  private async acquire(): Promise<boolean> {
    const { instanceId, windowMs } = this.options;
    // Statements on this session are bounded by the window (the client's deadline a grace after).
    const client = createPostgresClient({ ...this.pg, queryTimeoutMs: windowMs }, `eventmesh-${instanceId}-liveness`);
    client.on('error', () => {
      // The connection broke: the next confirmation fails and the session is dropped.
      if (this.client === client) this.confirmedAt = 0;
    });
    try {
      await client.connect();
      const askedAt = Date.now();
      const { rows } = await client.query<{ locked: boolean; pid: number }>(
        'SELECT pg_try_advisory_lock($1::int4, hashtext($2)) AS locked, pg_backend_pid() AS pid',
        [LIVENESS_LOCK_CLASS, instanceId],
      );
      if (rows[0]?.locked) {
        this.client = client;
        this.previousPid = rows[0].pid;
        this.acquired = this.confirmedAt = askedAt;
        this.log.info({ instanceId }, 'liveness lock taken');
        return true;
      }
      // Held by this instance's own earlier session that the server has not seen end (a half-open link): end it.
      // Held by a peer instead (taking over after this instance's session ended): wait for it to let go.
      if (this.previousPid !== undefined) {
        await client.query(
          `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE pid = $3 AND locktype = 'advisory' AND objsubid = 2
              AND classid = $1::int4::oid AND objid = hashtext($2)::oid`,
          [LIVENESS_LOCK_CLASS, instanceId, this.previousPid],
        );
      }
    } catch (e) {
      this.log.debug({ error: reasonOf(e) }, 'could not take the liveness lock');
    }
    await this.end(client);
    return false;
  }

  private async drop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.confirmedAt = 0;
    if (client) await this.end(client);
  }

  /** Ends a session, not waiting on a dead link for longer than the window. */
  private async end(client: Client): Promise<void> {
    await withDeadline(this.options.windowMs, client.end()).catch(() => undefined);
  }
}
