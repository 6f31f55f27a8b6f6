/**
 * The bare Temporal baseline of `npm run bench:a2a`: one workflow per task that returns its input at once, no
 * activity. Started and awaited per task, it is the least a durable task costs on the Temporal server (a start,
 * one workflow task, a completion, the result read back).
 */
export function benchA2aBaseline(id: string): Promise<string> {
  return Promise.resolve(id);
}
