import type { FaultRunResult } from './fault-run';

/**
 * What every fault case asserts of its checker result: nothing acknowledged lost, every subscription drained,
 * and, where the case promises order (`order`, the default), no per-key order violation.
 */
export function expectNothingLost(result: FaultRunResult, { order = true }: { order?: boolean } = {}): void {
  expect(result.lost).toBe(0);
  expect(result.drained).toBe(true);
  if (order) expect(result.orderViolations).toBe(0);
}
