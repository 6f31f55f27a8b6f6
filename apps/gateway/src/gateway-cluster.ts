import cluster, { Worker } from 'node:cluster';
import type { EventMeshConfig } from '../../../libs/config';
import { createLogger } from '../../../libs/logging';

/** How long the processes get to shut down gracefully before they are killed. */
const STOP_DEADLINE_MS = 30_000;

/**
 * The primary of a gateway-only instance with EVENTMESH_HTTP_PROCESSES > 1: forks that many gateway processes
 * (Node's cluster module; they share the port, and the primary hands each new connection to the next one in
 * turn) and supervises them. It connects to nothing itself. Each process is a whole gateway with its own Kafka
 * producer, Postgres pool and Temporal client, under the instance's id: the subscriptions it creates are pinned
 * to that id and dispatched by the instance's worker, and a request-reply is held by the process that took it
 * (replies find it by correlation id). No request needs state another process holds. A process that fails before it listens stops the instance
 * (its error is already on stderr); one that dies later is replaced. SIGTERM or SIGINT stops them all gracefully.
 */
export function runGatewayCluster(config: EventMeshConfig): void {
  const log = createLogger('GatewayCluster');
  const count = config.http.processes;
  const slots = new Map<Worker, number>();
  const listening = new Set<number>();
  let stopping = false;

  const fork = (n: number) => {
    const worker = cluster.fork({ EVENTMESH_HTTP_PROCESSES: '1' });
    slots.set(worker, n);
  };

  const stop = (signal: string, code: number) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down the gateway processes');
    for (const worker of slots.keys()) worker.process.kill('SIGTERM');
    const deadline = setTimeout(() => {
      for (const worker of slots.keys()) worker.process.kill('SIGKILL');
    }, STOP_DEADLINE_MS);
    deadline.unref();
    const done = () => (slots.size === 0 ? process.exit(code) : setTimeout(done, 50));
    done();
  };

  let announced = false;
  cluster.on('listening', (worker, address) => {
    const n = slots.get(worker)!;
    listening.add(n);
    log.info({ process: n, pid: worker.process.pid }, 'gateway process listening');
    if (listening.size === count && !announced) {
      // All of them listen, on the one port they share.
      announced = true;
      const host = config.http.host === '0.0.0.0' ? '127.0.0.1' : config.http.host;
      process.stdout.write(`eventmesh: instance ${config.instance.id} (${count} gateway processes) listening on http://${host}:${address.port}\n`);
    }
  });

  cluster.on('exit', (worker, code, signal) => {
    const n = slots.get(worker)!;
    slots.delete(worker);
    if (stopping) return;
    if (!listening.has(n)) {
      process.stderr.write(`eventmesh: gateway process ${n} failed to start (exit code ${code ?? signal}); stopping\n`);
      stop('startup failure', 1);
      return;
    }
    listening.delete(n);
    log.warn({ process: n, code, signal }, 'gateway process ended; starting a new one');
    fork(n);
  });

  process.once('SIGTERM', () => stop('SIGTERM', 0));
  process.once('SIGINT', () => stop('SIGINT', 0));
  for (let n = 1; n <= count; n++) fork(n);
}
