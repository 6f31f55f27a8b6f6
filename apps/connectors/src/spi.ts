import type { CloudEvent, EventInput } from '@eventmesh/client';

/**
 * The connector SPI. A connector is one folder under `connectors/` exporting a {@link ConnectorKind}: how its
 * config is validated (each refusal names its field), and how a job of it opens its source or sink. The job loop
 * (jobs/source-loop.ts, jobs/sink-loop.ts) does the rest: publishing through the SDK, the fenced position writes,
 * dead letters, heartbeats. A Kafka bridge or an HTTP source fits the same shapes: a source with a position it
 * can resume from, a sink that commits a (source, id) ledger with its writes.
 */

/** A config field refused, named as Kafka Connect's validation names it: `source.columns.id`. */
export class ConfigFieldError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
    this.name = 'ConfigFieldError';
  }
}

/** One record a source read: the event to publish and its topic, or why it cannot become one (dead-lettered). */
export type SourceRecord =
  | { ok: true; topic: string; event: EventInput & { id: string; source: string; type: string } }
  | { ok: false; reason: string; raw: unknown };

export interface PollResult {
  records: SourceRecord[];
  /** The position after every record of this poll; undefined when nothing was read (the position stays). */
  position?: string;
}

export interface SourceConnector {
  /**
   * How this source is exactly once, for the docs and `/admin/jobs`: what makes a record's event id deterministic
   * and what guarantees no record is skipped.
   */
  readonly exactlyOnce: string;
  /** Reads up to `max` records after `position` (undefined: from the start). Never skips a record behind it. */
  poll(position: string | undefined, max: number): Promise<PollResult>;
  /** Called after `position` was committed: what the source may now forget (delete published rows). */
  committed?(position: string): Promise<void>;
  /** Records after `position` not yet read, when the source can count them. */
  lag?(position: string | undefined): Promise<number>;
  close(): Promise<void>;
}

/** What happened to each event of a `put`, in order. */
export type PutOutcome = { ok: true; written: boolean } | { ok: false; permanent: boolean; reason: string };

export interface SinkConnector {
  /** How this sink is exactly once (the ledger it commits with its writes). */
  readonly exactlyOnce: string;
  /**
   * Writes the events; an event already written (by an earlier delivery of it) writes nothing and answers
   * `written: false`. A permanent failure (the row can never be written) is dead-lettered by the loop; a transient
   * one is retried later.
   */
  put(events: CloudEvent<unknown>[]): Promise<PutOutcome[]>;
  close(): Promise<void>;
}

/** What a job's connector gets besides its config: the checks a job's targets must pass. */
export interface ConnectorContext {
  /** Resolves a target host and returns the address to connect to; throws when the sink address rules refuse it. */
  pinHost(host: string, port: number, database: string): Promise<string>;
}

/** One kind of connector: `postgres-outbox`, `postgres-table`. */
export interface ConnectorKind<C> {
  readonly kind: string;
  readonly role: 'source' | 'sink';
  /** The config as given, checked and with defaults; throws {@link ConfigFieldError}. */
  validate(raw: unknown): C;
  /** The config's secret fields (paths), sealed at rest. */
  readonly secretFields: readonly string[];
  /**
   * A source's check of a position an operator resets it to (a non-empty string): why the source could not read
   * from it, or undefined when it can. Without it, any non-empty string is taken.
   */
  validatePosition?(position: string): string | undefined;
  openSource?(config: C, ctx: ConnectorContext): Promise<SourceConnector>;
  openSink?(config: C, ctx: ConnectorContext): Promise<SinkConnector>;
  /** The stream subscription a sink consumes. */
  subscriptionOf?(config: C): string;
}
