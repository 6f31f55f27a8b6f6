import cluster, { Worker } from 'node:cluster';
import type { EventMeshConfig } from '@libs/config';
import { createLogger } from '@libs/logging';

/** How long the processes get to shut down gracefully before they are killed. */
const STOP_DEADLINE_MS = 30_000;
/** A process that dies is started again after a delay that doubles with each recent death, up to the cap. */
const RESTART_DELAY_MS = 500;
const RESTART_DELAY_CAP_MS = 30_000;
/** More deaths than this within the window: the instance stops rather than crash-loop. */
const RESTART_LIMIT = 5;
const RESTART_WINDOW_MS = 60_000;

/**
 * The primary of a gateway-only instance with EVENTMESH_HTTP_PROCESSES > 1: forks that many gateway processes
 * (Node's cluster module; they share the port, and the primary hands each new connection to the next one in
 * turn) and supervises them. It connects to nothing itself. Each process is a whole gateway with its own Kafka
 * producer, Postgres pool and Temporal client, under the instance's id: the subscriptions it creates are pinned
 * to that id and dispatched by the instance's worker, and a request-reply is held by the process that took it
 * (replies find it by correlation id). No request needs state another process holds.
 *
 * Until every process listens once, a process that ends stops the instance with exit code 1 (its reason is on
 * stderr: a bad dependency fails them all alike). After that, a process that dies is started again, after a
 * delay that doubles with each recent death; more than {@link RESTART_LIMIT} deaths within a minute stop the
 * instance with exit code 1. SIGTERM or SIGINT stops every process gracefully: exit code 0, or 1 if one had to
 * be killed at the deadline.
 */
export function runGatewayCluster(config: EventMeshConfig): void {
  const log = createLogger('GatewayCluster');
  const count = config.http.processes;
  const slots = new Map<Worker, number>();
  const listening = new Set<number>();
  const deaths: number[] = [];
  let announced = false;
  let stopping = false;

  const fork = (n: number) => {
    const worker = cluster.fork({ EVENTMESH_HTTP_PROCESSES: '1' });
    slots.set(worker, n);
  };

  const stop = (reason: string, code: number) => {
    if (stopping) return;
    stopping = true;
    log.info({ reason }, 'shutting down the gateway processes');
    for (const worker of slots.keys()) worker.process.kill('SIGTERM');
    let exitCode = code;
    const deadline = setTimeout(() => {
      if (slots.size > 0) exitCode = 1;
      for (const worker of slots.keys()) worker.process.kill('SIGKILL');
    }, STOP_DEADLINE_MS);
    deadline.unref();
    const done = () => (slots.size === 0 ? process.exit(exitCode) : setTimeout(done, 50));
    done();
  };

  cluster.on('listening', (worker, address) => {
    const n = slots.get(worker)!;
    listening.add(n);
    log.info({ process: n, pid: worker.process.pid }, 'gateway process listening');
    if (listening.size === count && !announced) {
      // All of them listen, on the one port they share.
      announced = true;
      const host = config.http.host === '0.0.0.0' ? '127.0.0.1' : config.http.host;
      process.stdout.write(
        `eventmesh: instance ${config.instance.id} (${count} gateway processes) listening on http://${host}:${address.port}\n`,
      );
    }
  });

  cluster.on('exit', (worker, code, signal) => {
    const n = slots.get(worker)!;
    slots.delete(worker);
    listening.delete(n);
    if (stopping) return;
    if (!announced) {
      process.stderr.write(`eventmesh: gateway process ${n} failed to start (exit code ${code ?? signal}); stopping\n`);
      stop('startup failure', 1);
      return;
    }
    const now = Date.now();
    deaths.push(now);
    while (deaths[0] < now - RESTART_WINDOW_MS) deaths.shift();
    if (deaths.length > RESTART_LIMIT) {
      process.stderr.write(`eventmesh: gateway processes ended ${deaths.length} times within a minute; stopping\n`);
      stop('crash loop', 1);
      return;
    }
    const delay = Math.min(RESTART_DELAY_CAP_MS, RESTART_DELAY_MS * 2 ** (deaths.length - 1));
    log.warn({ process: n, code, signal, restartInMs: delay }, 'gateway process ended; starting a new one');
    setTimeout(() => {
      if (!stopping) fork(n);
    }, delay);
  });

  process.once('SIGTERM', () => stop('SIGTERM', 0));
  process.once('SIGINT', () => stop('SIGINT', 0));
  for (let n = 1; n <= count; n++) fork(n);
}
