import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifySignature } from '@eventmesh/client';

/** The Standard Webhooks timestamp tolerance the sink checks with: the SDK receiver's default. */
const TOLERANCE_SECONDS = 300;

/**
 * The sink every path delivers to, each path at its own URL (`/sink/<n>`) verified with its own key: a delivery
 * of a path that arrives while another is measured is checked with the key it was signed with, not counted bad
 * (before, one key was switched between paths and such stragglers failed verification). A route closed (its
 * subscription's DELETE answered) still verifies what comes later, and counts it as late.
 */
export class Sink {
  /** When each event id first arrived. */
  readonly firstAt = new Map<string, number>();
  received = 0;
  badSignatures = 0;
  delayMs = 0;
  /** Requests that reached a route after it was closed, and the latest of them, in ms after the close. */
  late = 0;
  latestLateMs = 0;
  private readonly routes = new Map<string, { secret?: string; closedAt?: number }>();
  private base = '';
  private server?: Server;

  /** A new route: its URL, and its key to set once known (before any event of its path is produced). */
  route(): { url: string; setKey(secret: string): void; close(): void } {
    const path = `/sink/${this.routes.size}`;
    const route: { secret?: string; closedAt?: number } = {};
    this.routes.set(path, route);
    return {
      url: `${this.base}${path}`,
      setKey: (secret) => (route.secret = secret),
      close: () => (route.closedAt = Date.now()),
    };
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const at = Date.now();
        this.received++;
        const route = this.routes.get(req.url ?? '');
        const signed = { method: req.method ?? 'POST', headers: req.headers, body: Buffer.concat(chunks) };
        if (!route?.secret || verifySignature(signed, [route.secret], TOLERANCE_SECONDS) !== undefined)
          this.badSignatures++;
        if (route?.closedAt !== undefined) {
          this.late++;
          this.latestLateMs = Math.max(this.latestLateMs, at - route.closedAt);
        }
        const batch = req.headers['content-type'] === 'application/cloudevents-batch+json';
        const ids = batch
          ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string }[]).map((e) => e.id)
          : [String(req.headers['ce-id'] ?? '')];
        for (const id of ids) if (id && !this.firstAt.has(id)) this.firstAt.set(id, at);
        if (this.delayMs > 0) setTimeout(() => res.writeHead(200).end(), this.delayMs);
        else res.writeHead(200).end();
      });
    });
    this.server.keepAliveTimeout = 60000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    this.server?.closeAllConnections();
    return new Promise((resolve) => this.server!.close(() => resolve()));
  }
}
