/**
 * This instance's share of a tenant's runtime-wide rate (events/s or bytes/s), from the demand every instance
 * reported at its last sync: demand-proportional, each demand capped at the whole rate (a client that floods one
 * instance cannot take every other instance's part), and floored at a thousandth of it (an instance the tenant
 * only starts to use keeps a little, so its first publish is not refused for want of history). The shares of
 * all instances computed from the same reports sum to 1; so the instances' buckets, each refilling at
 * share x rate with capacity share x burst, add up to the tenant's one bucket.
 *
 * `mine` is this instance's demand (per second, over its last interval); `others` the other instances' fresh
 * reports for the tenant. With nobody's demand known (a cold start), the rate is split evenly among the instances
 * that reported.
 */
export function shareOf(mine: number, others: readonly number[], rate: number): number {
  const floor = rate / 1000;
  const weigh = (demand: number) => Math.min(rate, Math.max(floor, demand));
  const total = weigh(mine) + others.reduce((sum, d) => sum + weigh(d), 0);
  return total > 0 ? weigh(mine) / total : 1 / (1 + others.length);
}
