import type { EventMeshConfig } from '../config';
import type { Dependencies } from '../runtime/dependencies';
import { reasonOf } from '../runtime/boot-error';
import { withDeadline } from '../runtime/deadline';
import { pingTemporal } from '../temporal';

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

/** Probes each dependency in parallel, each bounded by a deadline, and reports its state and any warning. */
export class HealthService {
  constructor(
    private readonly deps: Dependencies,
    private readonly config: EventMeshConfig,
    private readonly stats?: () => Record<string, unknown>,
    private readonly findings: HealthFinding[] = [],
    private readonly gate?: () => { ingress: string; admin: string },
  ) {}

  async check(): Promise<HealthReport> {
    const [found, postgres, kafka, temporal] = await Promise.all([
      Promise.all(
        this.findings.map((f) =>
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
    const warnings = found.flatMap((f) => f.warnings);
    const foundStats = Object.assign({}, ...found.map((f) => ('stats' in f ? f.stats : undefined)));
    const up = [postgres, kafka, temporal].every((d) => d.status === 'up');
    return {
      status: up ? 'up' : 'down',
      instance: this.config.instance.id,
      pid: process.pid,
      topology: this.config.delivery.topology,
      ...(this.gate ? { gate: this.gate() } : {}),
      dependencies: { postgres, kafka, temporal },
      ...(this.stats || Object.keys(foundStats).length > 0 ? { stats: { ...this.stats?.(), ...foundStats } } : {}),
      ...(warnings.length > 0 ? { warnings } : {}),
    };
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
