/**
 * The flags every instance process runs with (`scripts/run.sh`, `docker/Dockerfile`, the test and benchmark
 * launchers; `node-flags.spec.ts` checks the scripts carry the same). A young generation of 32 MiB semi-spaces
 * instead of V8's 16: the events in flight (a lane's records, a stream's window, the webhook requests out) live
 * for tens of milliseconds, past two scavenges of the default size, so V8 copied them twice and promoted them to die
 * in the old space. Measured in docs/operations.md#the-node-process.
 */
export const INSTANCE_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];
