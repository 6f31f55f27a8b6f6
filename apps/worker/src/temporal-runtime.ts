import { bundleWorkflowCode, DefaultLogger, Runtime, WorkerOptions } from '@temporalio/worker';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { EventMeshConfig } from '@libs/config';
import type { Logger } from '@libs/logging';
import { temporalTelemetryFor } from '@libs/metrics';
import { reasonOf } from '@libs/runtime';
import { TemporalTracing, TRACED_WORKFLOW_BUNDLE, WORKFLOW_BUNDLE } from '@libs/tracing';

/*
 * What every Temporal worker of the process shares: the core runtime, installed once, and the workflow bundle.
 */

/** Installed once per process: the Temporal core's metrics exporter address, if it has one. */
let runtimeInstall: Promise<string | undefined> | undefined;

/**
 * The process's Temporal core runtime: its logger, no signal handling, and (metrics on) its Prometheus exporter,
 * which /metrics merges (libs/metrics/temporal-telemetry.ts). It must be installed before any worker or native
 * connection exists (the SDK makes a default runtime on first use and refuses a later install), so WorkerHost
 * installs it first thing; a second instance in the same process (tests) shares the first one's. An exporter the
 * core cannot start (its address taken) costs the Temporal series, not the instance: the runtime is installed
 * without it, and the log says so.
 */
export function installTemporalRuntime(log: Logger, metrics: EventMeshConfig['metrics']): Promise<string | undefined> {
  runtimeInstall ??= (async () => {
    const options = {
      logger: new DefaultLogger('WARN', (entry) => {
        const fields = { ...(entry.meta ?? {}) };
        if (entry.level === 'ERROR') log.error(fields, entry.message);
        else log.warn(fields, entry.message);
      }),
      // The process entry (run-main.ts) owns the signals: by default the SDK also shuts every worker down on
      // SIGINT, SIGTERM, SIGQUIT and SIGUSR2, which would stop dispatch while the gateway answers on.
      shutdownSignals: [],
    };
    const telemetry = metrics.enabled ? await temporalTelemetryFor(metrics.temporalAddress) : undefined;
    if (telemetry) {
      try {
        Runtime.install({ ...options, telemetryOptions: { metrics: telemetry.metrics } });
        return telemetry.bindAddress;
      } catch (e) {
        log.warn(
          { address: telemetry.bindAddress, error: reasonOf(e) },
          'the Temporal metrics exporter could not start; no temporal_* series',
        );
      }
    }
    Runtime.install(options);
    return undefined;
  })();
  return runtimeInstall;
}

/** The workflow sources bundled in this process (no built bundle), plain and traced, each once. */
const sourceBundles = new Map<boolean, Promise<{ code: string }>>();

/** The folders whose files the workflow bundle is made of (scripts/build-workflow-bundle.ts). */
const BUNDLED_SOURCES = ['workflows', 'contracts'];

/**
 * The built bundle to load, if there is one that holds the current workflow code: the one `npm run build` wrote
 * next to the compiled code (a built process), or, for a process running the TypeScript sources (the tests), the one
 * in `dist/` when it is newer than every bundled source file. A stale bundle is never loaded: the sources are bundled
 * instead.
 */
export function builtBundle(name: string, root = path.resolve(__dirname, '../../..')): string | undefined {
  const beside = path.join(root, name);
  if (existsSync(beside)) return beside;
  const inDist = path.join(root, 'dist', name);
  if (!existsSync(inDist)) return undefined;
  const builtAt = statSync(inDist).mtimeMs;
  const fresh = BUNDLED_SOURCES.every((dir) =>
    readdirSync(path.join(root, dir)).every((file) => statSync(path.join(root, dir, file)).mtimeMs < builtAt),
  );
  return fresh ? inDist : undefined;
}

/**
 * The built bundle ({@link builtBundle}); else the workflow sources, bundled once per process and shared by every
 * worker that runs workflows (the dispatch or control worker, and the A2A task worker). With tracing on, the bundle
 * with the SDK's OpenTelemetry workflow interceptors (libs/tracing/workflow-bundle.ts), their sink for the sandbox's
 * spans, and the activity interceptors.
 */
export async function workflowSource(
  tracing: TemporalTracing | undefined,
): Promise<Pick<WorkerOptions, 'workflowBundle' | 'interceptors' | 'sinks'>> {
  const traced = tracing ? { sinks: tracing.sinks, interceptors: { activity: tracing.activityInterceptors } } : {};
  const built = builtBundle(tracing ? TRACED_WORKFLOW_BUNDLE : WORKFLOW_BUNDLE);
  if (built) return { workflowBundle: { codePath: built }, ...traced };
  const key = tracing !== undefined;
  let bundle = sourceBundles.get(key);
  if (!bundle) {
    bundle = bundleWorkflowCode({
      workflowsPath: require.resolve(path.resolve(__dirname, '../../../workflows')),
      workflowInterceptorModules: tracing?.workflowModules ?? [],
      logger: new DefaultLogger('WARN'),
    });
    sourceBundles.set(key, bundle);
    bundle.catch(() => sourceBundles.delete(key));
  }
  return { workflowBundle: await bundle, ...traced };
}
