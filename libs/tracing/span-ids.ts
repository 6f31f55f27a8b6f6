import { randomFillSync } from 'node:crypto';
import type { IdGenerator } from '@opentelemetry/sdk-trace-base';

/** Random bytes drawn from the system's CSPRNG a block at a time: one system call per this many bytes. */
const POOL_BYTES = 4096;

/**
 * Trace and span ids from cryptographically random bytes (W3C Trace Context asks for random trace ids), taken from
 * a pool refilled a block at a time, as lower-case hex in one conversion each. Never all zeros (an invalid id): such
 * a draw is taken again. The SDK's default draws each id from Math.random 4 bytes at a time; a publish makes a trace
 * id and a span id per request, so this is on the publish path.
 */
export class PooledIdGenerator implements IdGenerator {
  private readonly pool = Buffer.allocUnsafe(POOL_BYTES);
  private offset = POOL_BYTES;

  /** `fill` refills the pool with random bytes (a test may give its own). */
  constructor(private readonly fill: (pool: Buffer) => void = (pool) => randomFillSync(pool)) {}

  generateTraceId(): string {
    return this.draw(16);
  }

  generateSpanId(): string {
    return this.draw(8);
  }

  private draw(bytes: number): string {
    for (;;) {
      if (this.offset + bytes > POOL_BYTES) {
        this.fill(this.pool);
        this.offset = 0;
      }
      const start = this.offset;
      this.offset += bytes;
      const id = this.pool.toString('hex', start, start + bytes);
      if (!/^0+$/.test(id)) return id;
    }
  }
}
