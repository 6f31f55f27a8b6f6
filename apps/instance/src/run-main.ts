import cluster from 'node:cluster';
import { ConfigError, InstanceRole, loadConfig } from '@libs/config';
import { configureLogging, createLogger } from '@libs/logging';
import { BootError, reasonOf } from '@libs/runtime';
import { SecretBox } from '@libs/security';
import { runGatewayCluster } from './gateway-cluster';
import { RunningInstance, startInstance } from './instance';

/**
 * Process entry: configuration errors and unreachable dependencies end the process with one line on stderr
 * (`eventmesh: ...`) and a non-zero exit; SIGTERM and SIGINT shut the instance down gracefully.
 */
export async function runMain(roles?: InstanceRole[]): Promise<void> {
  let instance: RunningInstance | undefined;
  // A promise nobody awaited failed: a bug. Say it in one line (the log has the detail) and stop, rather than
  // run on in an unknown state.
  process.on('unhandledRejection', (reason) => {
    createLogger('Process').fatal({ err: reason }, 'unhandled rejection');
    process.stderr.write(`eventmesh: internal error: ${reasonOf(reason)}\n`);
    process.exit(70);
  });
  try {
    const config = loadConfig();
    // Required by every process of the instance: said once here (exit 78), before any gateway process is forked.
    SecretBox.fromConfig(config);
    const log = configureLogging(config.log.level, { instance: config.instance.id }, 'info', config.log.format);
    if (config.http.processes > 1 && cluster.isPrimary) {
      // The worker entry point (apps/worker) asks for the worker role whatever the environment says.
      if (roles && roles.join() !== 'gateway') {
        throw new ConfigError([
          `EVENTMESH_HTTP_PROCESSES (eventmesh.http.processes) = ${config.http.processes} is for a gateway-only instance; ` +
            `this entry point runs the ${roles.join(',')} role: legal values: 1`,
        ]);
      }
      runGatewayCluster(config);
      return;
    }
    instance = await startInstance(config, {
      roles: roles ?? config.instance.roles,
      onFatal: (reason) => {
        process.stderr.write(`eventmesh: ${reason}\n`);
        void instance?.close().finally(() => process.exit(1));
      },
    });
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'shutting down');
      void instance!.close().then(() => process.exit(0));
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
    // A gateway process of a cluster (gateway-cluster.ts) does not outlive its primary: it closes gracefully
    // (Node would otherwise exit at once, unless the disconnect is marked as expected).
    cluster.worker?.once('disconnect', () => {
      cluster.worker!.exitedAfterDisconnect = true;
      stop('primary gone');
    });
    if (instance.url && cluster.isPrimary) {
      process.stdout.write(`eventmesh: instance ${config.instance.id} listening on ${instance.url}\n`);
    }
    if (instance.opsUrl) {
      process.stdout.write(
        `eventmesh: instance ${config.instance.id} (worker only) serving /health and /metrics on ${instance.opsUrl}\n`,
      );
    }
  } catch (e) {
    const message =
      e instanceof ConfigError ? e.message : e instanceof BootError ? e.message : `failed to start: ${reasonOf(e)}`;
    process.stderr.write(`eventmesh: ${message}\n`);
    process.exit(e instanceof ConfigError ? 78 : 1);
  }
}
