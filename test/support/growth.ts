/**
 * Complexity guards without a clock bound. A guard that times one run against a fixed number of milliseconds
 * measures the machine as much as the code (a loaded 2-core CI host is many times slower than a laptop); a guard
 * that compares the same work at two sizes on the same machine, moments apart, measures how the cost grows, which
 * is what a complexity claim is about.
 *
 * At n and at 4n a linear algorithm takes about 4 times as long, a quadratic one 16 times: {@link GROWTH_LIMIT}
 * sits between them, a factor of 2 from each. What is timed is the CPU this process spends (other processes on
 * the machine take none of it), and each size is timed as the fastest of several interleaved runs (a slow spell,
 * a garbage collection, only ever makes a run slower, so the fastest is the closest to the work itself). Measured
 * on a 2-core host under a load average of 4: linear matchers 2.6 to 4.1, never near the limit.
 */

/** What a linear algorithm's time grows by from n to 4n is 4; a quadratic one's 16. The limit: their geometric mean. */
export const GROWTH_LIMIT = 8;

/**
 * Milliseconds of CPU this process spends on one call of `run`: not wall time, which counts the time other
 * processes of a loaded machine hold its cores (and a short run may escape them where a longer one cannot).
 */
export function timed(run: () => void): number {
  const start = process.cpuUsage();
  run();
  const spent = process.cpuUsage(start);
  return (spent.user + spent.system) / 1000;
}

/**
 * How many times longer `work` takes on the input `make(4 * n)` than on `make(n)` (inputs made before timing):
 * about 4 for a linear algorithm, 16 for a quadratic one. Measured again, up to {@link ATTEMPTS} times, while the
 * ratio is not below `limit` (see {@link costRatio}).
 */
export function growthFrom<T>(
  n: number,
  make: (size: number) => T,
  work: (input: T) => void,
  limit = GROWTH_LIMIT,
): number {
  return costRatio(make(n), make(4 * n), work, limit);
}

/**
 * How many independent measurements a guard takes before it reports a ratio at or above its limit. Noise only ever
 * makes one run slower than the work: a measurement spoilt by it (a jest process that still runs an earlier file's
 * timers and sockets, whose CPU `process.cpuUsage` counts too) is not repeated three times over, while a quadratic
 * algorithm is 16 times slower in every one of them.
 */
export const ATTEMPTS = 3;

/**
 * How many times longer `work` takes on `large` than on `small`. The work is repeated until a run on `small` lasts
 * a few milliseconds (well above the clock's resolution), which also warms it up; each input is then timed
 * `rounds` times, interleaved, and the fastest of each kept. With a `limit`, a ratio not below it is measured
 * again, up to {@link ATTEMPTS} times, and the lowest is answered.
 */
export function costRatio<T>(small: T, large: T, work: (input: T) => void, limit = Infinity, rounds = 5): number {
  let lowest = Infinity;
  for (let attempt = 0; attempt < ATTEMPTS && lowest >= limit; attempt++)
    lowest = Math.min(lowest, measuredRatio(small, large, work, rounds));
  return lowest;
}

function measuredRatio<T>(small: T, large: T, work: (input: T) => void, rounds: number): number {
  let repeats = 1;
  const run = (input: T) => () => {
    for (let i = 0; i < repeats; i++) work(input);
  };
  while (timed(run(small)) < 5 && repeats < 1 << 20) repeats *= 2;
  let bestSmall = Infinity;
  let bestLarge = Infinity;
  for (let r = 0; r < rounds; r++) {
    bestSmall = Math.min(bestSmall, timed(run(small)));
    bestLarge = Math.min(bestLarge, timed(run(large)));
  }
  return bestLarge / bestSmall;
}
