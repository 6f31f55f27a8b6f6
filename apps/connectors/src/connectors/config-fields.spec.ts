import { createServer, type Server, type Socket } from 'node:net';
import { poolFor } from './config-fields';

/** A server on loopback that takes connections and never says a word: a database that hangs. */
async function silentServer(): Promise<{ server: Server; port: number; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port, sockets };
}

describe("a job's database pool", () => {
  it('fails a query to a database that does not answer, within its connect limit, instead of waiting for good', async () => {
    const { server, port, sockets } = await silentServer();
    const pool = poolFor({ host: 'db', port, database: 'd', user: 'u', password: 'p' }, '127.0.0.1', 1, {
      connectMs: 200,
      statementMs: 1000,
      queryMs: 1000,
    });
    try {
      // Settled either way within the deadline below (10x the limit); without a limit it never settles.
      const outcome = await Promise.race([
        pool.query('SELECT 1').then(
          () => 'answered',
          (e: Error) => `failed: ${e.message}`,
        ),
        new Promise<string>((r) => setTimeout(() => r('still waiting'), 2000).unref()),
      ]);
      expect(outcome).toMatch(/^failed: .*timeout/i);
      expect(sockets.length).toBeGreaterThan(0);
    } finally {
      sockets.forEach((s) => s.destroy());
      await pool.end();
      await new Promise((r) => server.close(r));
    }
  });
});
