import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * An event-loop delay probe loaded into an instance process under test (`node --require <this file>`), so the
 * soak measures the instance's own loop lag without a change to the runtime. When FAULTS_LAG_FILE is set, it
 * appends one JSON line per FAULTS_LAG_SAMPLE_MS (default 5000): `{kind: "sample", t, rssMb, p50, p99, max}`
 * (milliseconds, from perf_hooks.monitorEventLoopDelay at 10 ms resolution, reset every sample), and, on each
 * SIGWINCH, `{kind: "window", t, p50, p99, max}` over the time since the previous one (the soak sends one at the
 * start and at the end of each of its windows, so the windows are exactly its own). Not SIGUSR2: the Temporal
 * SDK's default shutdown signals include it, and its worker (the dispatch loop) would stop.
 */
export const LAG_PROBE_FILE = __filename;

export function startLagProbe(file: string, sampleMs: number): void {
  const sample = monitorEventLoopDelay({ resolution: 10 });
  const window = monitorEventLoopDelay({ resolution: 10 });
  sample.enable();
  window.enable();
  const ms = (ns: number) => Math.round(ns / 1e4) / 100;
  const write = (line: Record<string, unknown>) => appendFileSync(file, `${JSON.stringify(line)}\n`);
  setInterval(() => {
    write({
      kind: 'sample',
      t: Date.now(),
      rssMb: Math.round(process.memoryUsage.rss() / 1e4) / 100,
      p50: ms(sample.percentile(50)),
      p99: ms(sample.percentile(99)),
      max: ms(sample.max),
    });
    sample.reset();
  }, sampleMs).unref();
  process.on('SIGWINCH', () => {
    write({
      kind: 'window',
      t: Date.now(),
      p50: ms(window.percentile(50)),
      p99: ms(window.percentile(99)),
      max: ms(window.max),
    });
    window.reset();
  });
}

if (process.env.FAULTS_LAG_FILE) {
  startLagProbe(process.env.FAULTS_LAG_FILE, Number(process.env.FAULTS_LAG_SAMPLE_MS ?? 5000));
}
