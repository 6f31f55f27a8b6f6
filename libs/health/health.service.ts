import type { EventMeshConfig } from '@libs/config';
import type { Dependencies } from '@libs/runtime';
import { reasonOf } from '@libs/runtime';
import { withDeadline } from '@libs/runtime';
import { SharedRead } from '@libs/runtime';
import { pingTemporal } from '@libs/temporal';

export interface DependencyHealth {
  status: 'up' | 'down';
  latencyMs: number;
  error?: string;
  [detail: string]: unknown;
}

export interface HealthReport {
  status: 'up' | 'down';
  instance: string;
  /** The answering process (a gateway-only instance may run several: EVENTMESH_HTTP_PROCESSES). */
  pid: number;
  topology: string;
  /**
   * The request gate and the admin API's gate: `open` (no filter: everyone is admitted), `report-only` (filters
   * run and audit, nothing is refused) or `enforcing`. Absent where no gateway runs.
   */
  gate?: { ingress: string; admin: string };
  dependencies: { postgres: DependencyHealth; kafka: DependencyHealth; temporal: DependencyHealth };
  /** Delivery progress (as /health/ready judges it), where the instance reports its dispatch loops. */
  delivery?: DeliveryHealth;
  /** Counters of this instance's own work (request-reply), where it has any. */
  stats?: Record<string, unknown>;
  /**
   * What an operator must know although every dependency is up (the status stays `up`, the answer 200): events
   * Kafka deleted before a subscription got them (`EVENTS_SKIPPED`), orphaned subscriptions. Absent when there is
   * nothing to say.
   */
  warnings?: HealthWarning[];
}

/** A machine-readable warning of `/health`: a stable code, a sentence, and details. */
export interface HealthWarning {
  code: string;
  message: string;
  [detail: string]: unknown;
}

/**
 * Stats and warnings that take a query (in the runtime's state, not a dependency's health): orphaned
 * subscriptions, skipped events. Each is bounded by the probe deadline; one that fails or is late is a warning
 * itself, since silence would read as "nothing to say".
 */
export interface HealthFinding {
  /** The warning code when the finding cannot be read. */
  unknownCode: string;
  read(): Promise<{ stats?: Record<string, unknown>; warnings: HealthWarning[] }>;
}

const PROBE_TIMEOUT_MS = 2000;

/** `/health/live`: the process answers (nothing else is asked). */
export interface LivenessReport {
  status: 'up';
  instance: string;
  pid: number;
  uptimeSeconds: number;
}

/** How delivery progresses in this instance: its running dispatch loops and how recently each completed a round. */
export interface DeliveryHealth {
  status: 'up' | 'stalled';
  /** Dispatch loops running now (0: no worker role, dispatch paused, between runs, or no partition owned). */
  loops: number;
  /** Since the least recent loop completed a round; absent with no loop. */
  lastRoundAgeMs?: number;
  staleAfterMs: number;
}

/** `/health/ready`: the dependencies (from the shared check round) and delivery progress. */
export interface ReadinessReport {
  status: 'up' | 'down';
  instance: string;
  pid: number;
  dependencies: { postgres: DependencyHealth; kafka: DependencyHealth; temporal: DependencyHealth };
  delivery: DeliveryHealth;
  /** When the dependency checks shown ran (they are shared for EVENTMESH_HEALTH_CHECK_CACHE_MS). */
  checkedAt: string;
}

export interface HealthOptions {
  /** In-memory counters of the instance's own work (read on every call: no backend is asked). */
  stats?: () => Record<string, unknown>;
  findings?: HealthFinding[];
  gate?: () => { ingress: string; admin: string };
  /** The instance's running dispatch loops; absent: no delivery check. */
  loops?: { values(): { lastRoundAt: number }[] };
}

/** One round of backend checks: each dependency and each finding. */
interface CheckRound {
  at: Date;
  dependencies: HealthReport['dependencies'];
  found: { stats?: Record<string, unknown>; warnings: HealthWarning[] }[];
}

/**
 * Probes each dependency in parallel, each bounded by a deadline, and reports its state and any warning. The
 * probes and findings ask the backends, and the routes are public: one round of them serves every call within
 * EVENTMESH_HEALTH_CHECK_CACHE_MS, and calls during a round wait for it (SharedRead), so the backends see at most
 * one round per period whoever calls. Liveness asks nothing.
 */
export class HealthService {
  private readonly rounds: SharedRead<CheckRound>;
  private readonly started = performance.now();

  constructor(
    private readonly deps: Dependencies,
    private readonly config: EventMeshConfig,
    private readonly options: HealthOptions = {},
  ) {
    this.rounds = new SharedRead(() => this.checkRound(), config.health.checkCacheMs);
  }

  live(): LivenessReport {
    return {
      status: 'up',
      instance: this.config.instance.id,
      pid: process.pid,
      uptimeSeconds: Math.round((performance.now() - this.started) / 1000),
    };
  }

  async ready(): Promise<ReadinessReport> {
    const round = await this.rounds.get();
    const delivery = this.delivery();
    const up = Object.values(round.dependencies).every((d) => d.status === 'up') && delivery.status === 'up';
    return {
      status: up ? 'up' : 'down',
      instance: this.config.instance.id,
      pid: process.pid,
      dependencies: round.dependencies,
      delivery,
      checkedAt: round.at.toISOString(),
    };
  }

  async check(): Promise<HealthReport> {
    const { stats, gate } = this.options;
    const round = await this.rounds.get();
    const warnings = round.found.flatMap((f) => f.warnings);
    const foundStats = Object.assign({}, ...round.found.map((f) => ('stats' in f ? f.stats : undefined)));
    const up = Object.values(round.dependencies).every((d) => d.status === 'up');
    return {
      status: up ? 'up' : 'down',
      instance: this.config.instance.id,
      pid: process.pid,
      topology: this.config.delivery.topology,
      ...(gate ? { gate: gate() } : {}),
      dependencies: round.dependencies,
      ...(this.options.loops ? { delivery: this.delivery() } : {}),
      ...(stats || Object.keys(foundStats).length > 0 ? { stats: { ...stats?.(), ...foundStats } } : {}),
      ...(warnings.length > 0 ? { warnings } : {}),
    };
  }

  /** Stalled while some running loop has not completed a round within EVENTMESH_HEALTH_DISPATCH_STALE_MS. */
  private delivery(): DeliveryHealth {
    const staleAfterMs = this.config.health.dispatchStaleMs;
    const rounds = (this.options.loops?.values() ?? []).map((l) => l.lastRoundAt);
    if (rounds.length === 0) return { status: 'up', loops: 0, staleAfterMs };
    const lastRoundAgeMs = Math.max(0, Date.now() - Math.min(...rounds));
    return {
      status: lastRoundAgeMs > staleAfterMs ? 'stalled' : 'up',
      loops: rounds.length,
      lastRoundAgeMs,
      staleAfterMs,
    };
  }

  private async checkRound(): Promise<CheckRound> {
    const [found, postgres, kafka, temporal] = await Promise.all([
      Promise.all(
        (this.options.findings ?? []).map((f) =>
          withDeadline(PROBE_TIMEOUT_MS, f.read()).catch((e: unknown) => ({
            warnings: [{ code: f.unknownCode, message: `could not be read: ${reasonOf(e)}` }],
          })),
        ),
      ),
      probe(async () => {
        await this.deps.db.query('SELECT 1');
        return { address: `${this.config.postgres.host}:${this.config.postgres.port}` };
      }),
      probe(async () => ({ brokers: (await this.deps.topics.describeCluster()).brokers })),
      probe(async () => {
        await pingTemporal(this.deps.temporal, PROBE_TIMEOUT_MS);
        return { address: this.config.temporal.address, uiUrl: this.config.temporal.uiUrl };
      }),
    ]);
    return { at: new Date(), dependencies: { postgres, kafka, temporal }, found };
  }
}

async function probe(check: () => Promise<Record<string, unknown>>): Promise<DependencyHealth> {
  const started = performance.now();
  try {
    const details = await withDeadline(PROBE_TIMEOUT_MS, check());
    return { status: 'up', latencyMs: Math.round(performance.now() - started), ...details };
  } catch (e) {
    return { status: 'down', latencyMs: Math.round(performance.now() - started), error: reasonOf(e) };
  }
}
