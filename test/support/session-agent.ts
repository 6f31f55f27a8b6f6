/**
 * One replica of a streaming-session agent as its own process, so that SIGKILL is a real crash (nothing closed on
 * its way out). It serves SESSION_AGENT_NAME through the SDK built at SESSION_AGENT_SDK (dist/packages/client/src),
 * on the runtime at SESSION_AGENT_URL with SESSION_AGENT_TOKEN, and answers a call `{ chunks, delayMs?, bytes? }` with
 * that many chunks, one every `delayMs` (else as fast as its credit lets it): `<pid>:<n>`, or `bytes` bytes starting
 * with n (a u32). It prints `serving <replica id>` once the runtime took it. The spec
 * transpiles this file and runs it with node (test/support/session-agent-process.ts).
 */
import type * as Sdk from '../../packages/client/src';

// The SDK as the built package (a path known at run time): this file runs outside jest, after transpiling.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { EventMeshClient } = require(process.env.SESSION_AGENT_SDK!) as typeof Sdk;

const mesh = new EventMeshClient({ url: process.env.SESSION_AGENT_URL!, token: process.env.SESSION_AGENT_TOKEN });
void mesh
  .streaming()
  .serve(process.env.SESSION_AGENT_NAME!, async (request, { send, signal }) => {
    const { chunks, delayMs, bytes } = request.json<{ chunks: number; delayMs?: number; bytes?: number }>();
    for (let n = 0; n < chunks && !signal.aborted; n++) {
      if (bytes) {
        const chunk = Buffer.alloc(bytes);
        chunk.writeUInt32BE(n, 0);
        await send(chunk);
      } else await send(`${process.pid}:${n}`);
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    }
  })
  .then(
    (server) => process.stdout.write(`serving ${server.replica}\n`),
    (e: Error) => {
      process.stderr.write(`serve failed: ${e.message}\n`);
      process.exit(1);
    },
  );
