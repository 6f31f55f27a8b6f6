import { runChaos } from '../test/faults/chaos';
import { exitWith, flag, runSettings } from './fault-args';

/**
 * `npm run chaos -- --minutes N [--instances 3] [--rate 60] [--drain-seconds 180] [--seed S] [--no-server-faults]`:
 * a random schedule of faults under load, then the checker's table (test/faults/chaos.ts). Exit code 1 when
 * anything acknowledged was lost. Run it under the shared-server lock: it kills and restarts Kafka and Postgres.
 */
exitWith(
  runChaos({
    minutes: Number(flag('minutes', '1')),
    instances: Number(flag('instances', '3')),
    ratePerSecond: Number(flag('rate', '60')),
    drainSeconds: Number(flag('drain-seconds', '180')),
    seed: Number(flag('seed', String(Date.now() % 1e9))),
    noServerFaults: process.argv.includes('--no-server-faults'),
    env: runSettings(),
  }),
);
