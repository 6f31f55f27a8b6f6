import { runSoak } from '../test/faults/soak';
import { exitWith, flag, runSettings } from './fault-args';

/**
 * `npm run soak -- --minutes 30 [--rate R] [--measure-seconds 20] [--window-minutes 5]`: one instance at half its
 * measured publish-and-deliver maximum (or R events/s), reporting memory slope and event-loop lag p99 per window
 * (test/faults/soak.ts). Run it under the shared-server lock.
 */
const rate = flag('rate', '');
exitWith(
  runSoak({
    minutes: Number(flag('minutes', '30')),
    ratePerSecond: rate ? Number(rate) : undefined,
    measureSeconds: Number(flag('measure-seconds', '20')),
    windowMinutes: Number(flag('window-minutes', '5')),
    env: runSettings(),
  }),
);
