import { createServer } from 'node:net';

/**
 * The Temporal SDK core's own metrics (workflow and activity task latencies, slots, polls, sticky cache) come from
 * its Prometheus exporter, which the core runtime serves on an address of its own. It is configured once per
 * process, by `Runtime.install`, before any worker or native connection exists (apps/worker/src/worker-host.ts).
 * `/metrics` reads it and appends its text, so one scrape gets every series of the process.
 */
export interface TemporalTelemetry {
  /** The exporter's address (host:port), given or chosen. */
  bindAddress: string;
  /** `Runtime.install`'s `telemetryOptions.metrics`. */
  metrics: { prometheus: { bindAddress: string; countersTotalSuffix: boolean; useSecondsForDurations: boolean } };
}

/**
 * The exporter's settings for EVENTMESH_METRICS_TEMPORAL_ADDRESS: a host:port as given, or (unset) a loopback
 * port free right now (asked of the OS, then released for the core to bind; another process could take it in
 * between, and the core then serves no metrics: /metrics says so in eventmesh_metrics_source_errors_total).
 * undefined for `off`.
 */
export async function temporalTelemetryFor(setting: string): Promise<TemporalTelemetry | undefined> {
  if (setting === 'off') return undefined;
  const bindAddress = setting !== '' ? setting : `127.0.0.1:${await freeLoopbackPort()}`;
  return {
    bindAddress,
    metrics: { prometheus: { bindAddress, countersTotalSuffix: true, useSecondsForDurations: true } },
  };
}

function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The exporter's text, or a rejection after `timeoutMs`. */
export async function scrapeTemporal(bindAddress: string, timeoutMs: number): Promise<string> {
  const host = bindAddress.startsWith('0.0.0.0:') ? `127.0.0.1:${bindAddress.slice(8)}` : bindAddress;
  const response = await fetch(`http://${host}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
  if (!response.ok) throw new Error(`the Temporal core's exporter answered ${response.status}`);
  return response.text();
}
