import { createServer, Server, Socket, connect } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * What the link does now:
 * - `pass`: forwards both ways (after the configured latency);
 * - `cut`: every open connection was dropped, and a new one is closed as soon as it is accepted;
 * - `hold` (half-open): connections are accepted and kept, but nothing is forwarded either way and nothing is
 *   closed, like a peer behind a partition; what was sent is held and delivered in order when the link heals.
 */
export type LinkMode = 'pass' | 'cut' | 'hold';

export interface FaultProxyOptions {
  /** The port to listen on (127.0.0.1); 0 (default) takes a free one. */
  listenPort?: number;
}

/** One forwarded connection: the client side, the upstream side, and what each way is holding back. */
interface Link {
  client: Socket;
  upstream: Socket;
  /** Chunks waiting to go upstream / back to the client, with the time each may go. */
  up: { due: number; chunk: Buffer }[];
  down: { due: number; chunk: Buffer }[];
  timers: Set<NodeJS.Timeout>;
  /** Black-holed for good by {@link FaultProxy.strand}: nothing forwarded either way, nothing closed, no heal. */
  stranded: boolean;
}

/**
 * A TCP proxy on loopback in front of one server: the link between the processes under test and that server,
 * on which a test injects faults: latency (per chunk, or per new connection), cut, half-open hold, reset (RST)
 * and heal. Every fault applies to open connections and new ones alike, until {@link heal}; except
 * {@link strand}, which black-holes the connections open now for good while new ones pass.
 */
export class FaultProxy {
  private server?: Server;
  private readonly links = new Set<Link>();
  /** Accepted connections that have no upstream yet (held, or waiting out the connection latency). */
  private readonly pending = new Set<Socket>();
  /** Accepted connections {@link strand} caught before they had an upstream: never opened. */
  private readonly strandedPending = new Set<Socket>();
  private mode: LinkMode = 'pass';
  private stopping = false;
  private chunkLatencyMs = 0;
  private connectLatencyMs = 0;
  /** Bytes forwarded each way, and connections accepted: a test can see that traffic went through. */
  readonly counters = { connections: 0, bytesUp: 0, bytesDown: 0, resets: 0 };

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
    private readonly options: FaultProxyOptions = {},
  ) {}

  /** Starts listening; resolves with `127.0.0.1:<port>`. */
  async start(): Promise<string> {
    this.server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(this.options.listenPort ?? 0, '127.0.0.1', () => resolve());
    });
    return this.address;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get port(): number {
    return (this.server!.address() as AddressInfo).port;
  }

  get state(): { mode: LinkMode; chunkLatencyMs: number; connectLatencyMs: number; open: number } {
    return {
      mode: this.mode,
      chunkLatencyMs: this.chunkLatencyMs,
      connectLatencyMs: this.connectLatencyMs,
      open: this.links.size + this.pending.size,
    };
  }

  /** Delays every chunk each way by `ms` (order kept), or, `perConnection`, only the opening of each new connection. */
  latency(ms: number, { perConnection = false }: { perConnection?: boolean } = {}): void {
    if (perConnection) this.connectLatencyMs = ms;
    else this.chunkLatencyMs = ms;
  }

  /** Drops every connection through the proxy and refuses new ones until {@link heal}. */
  cut(): void {
    this.mode = 'cut';
    for (const s of this.pending) s.destroy();
    this.pending.clear();
    for (const link of this.links) this.close(link);
  }

  /** Half-open: accepts and keeps connections but forwards nothing and closes nothing until {@link heal}. */
  hold(): void {
    this.mode = 'hold';
  }

  /**
   * Black-holes every connection open now, for good: nothing is forwarded either way and nothing is closed, not
   * even by {@link heal} (the proxy's own TCP stack keeps answering, so no keepalive of the client notices);
   * new connections are not affected. A peer lost behind a partition that drops packets without a RST.
   */
  strand(): void {
    for (const link of this.links) {
      link.stranded = true;
      this.clearTimers(link);
    }
    for (const s of this.pending) this.strandedPending.add(s);
    this.pending.clear();
  }

  /** Stranded connections the client side still keeps open: each one something in the client waits on forever. */
  get strandedOpen(): number {
    let open = 0;
    for (const link of this.links) if (link.stranded && !link.client.destroyed) open++;
    for (const s of this.strandedPending) if (!s.destroyed) open++;
    return open;
  }

  /** Resets (TCP RST) every open connection on both sides; new connections are not affected. */
  reset(): void {
    for (const s of this.pending) {
      s.resetAndDestroy();
      this.counters.resets++;
    }
    this.pending.clear();
    for (const link of this.links) {
      this.clearTimers(link);
      link.client.resetAndDestroy();
      link.upstream.resetAndDestroy();
      this.counters.resets++;
      this.links.delete(link);
    }
  }

  /** Back to a plain link: no latency, forwarding again; what a hold kept goes through in order. */
  heal(): void {
    const wasHolding = this.mode === 'hold';
    this.mode = 'pass';
    this.chunkLatencyMs = 0;
    this.connectLatencyMs = 0;
    if (!wasHolding) return;
    for (const link of this.links) {
      this.flush(link, 'up');
      this.flush(link, 'down');
    }
    for (const s of [...this.pending]) this.openUpstream(s);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.cut();
    for (const s of this.strandedPending) s.destroy();
    this.strandedPending.clear();
    const server = this.server;
    this.server = undefined;
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  private accept(client: Socket): void {
    this.counters.connections++;
    client.on('error', () => undefined);
    if (this.mode === 'cut') {
      client.destroy();
      return;
    }
    this.pending.add(client);
    client.pause();
    client.once('close', () => this.pending.delete(client));
    if (this.mode === 'hold') return; // opened by heal()
    if (this.connectLatencyMs > 0) {
      const timer = setTimeout(
        () => this.pending.has(client) && this.mode === 'pass' && this.openUpstream(client),
        this.connectLatencyMs,
      );
      client.once('close', () => clearTimeout(timer));
      return;
    }
    this.openUpstream(client);
  }

  private openUpstream(client: Socket): void {
    this.pending.delete(client);
    if (client.destroyed) return;
    const upstream = connect(this.targetPort, this.targetHost);
    const link: Link = { client, upstream, up: [], down: [], timers: new Set(), stranded: false };
    this.links.add(link);
    upstream.on('error', () => undefined);
    client.on('data', (chunk: Buffer) => this.enqueue(link, 'up', chunk));
    upstream.on('data', (chunk: Buffer) => this.enqueue(link, 'down', chunk));
    // A clean end on one side ends the other once what is queued has gone; an abort closes both at once.
    client.on('close', () => this.close(link));
    upstream.on('close', () => this.close(link));
    client.resume();
  }

  private enqueue(link: Link, way: 'up' | 'down', chunk: Buffer): void {
    const queue = link[way];
    const last = queue.length > 0 ? queue[queue.length - 1].due : 0;
    queue.push({ due: Math.max(Date.now() + this.chunkLatencyMs, last), chunk });
    if (way === 'up') this.counters.bytesUp += chunk.length;
    else this.counters.bytesDown += chunk.length;
    this.flush(link, way);
  }

  /** Writes the chunks of one way that are due, in order, unless the link holds; schedules the rest. */
  private flush(link: Link, way: 'up' | 'down'): void {
    if (this.mode === 'hold' || link.stranded) return;
    const queue = link[way];
    const target = way === 'up' ? link.upstream : link.client;
    while (queue.length > 0 && queue[0].due <= Date.now()) {
      if (!target.destroyed) target.write(queue.shift()!.chunk);
      else queue.shift();
    }
    if (queue.length > 0) {
      const timer = setTimeout(
        () => {
          link.timers.delete(timer);
          this.flush(link, way);
        },
        Math.max(1, queue[0].due - Date.now()),
      );
      link.timers.add(timer);
    }
  }

  private clearTimers(link: Link): void {
    for (const t of link.timers) clearTimeout(t);
    link.timers.clear();
  }

  private close(link: Link): void {
    // A stranded link closes only with the proxy (a peer behind the partition never hears the other end go).
    if (link.stranded && !this.stopping) return;
    if (!this.links.delete(link)) return;
    this.clearTimers(link);
    link.client.destroy();
    link.upstream.destroy();
  }
}
