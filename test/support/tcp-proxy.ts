import { createServer, Server, Socket, connect } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP proxy on a loopback port in front of one server: the link between one instance and that server, which a
 * test can cut (every open connection is dropped and new ones are refused) and heal. It listens on a free port,
 * or on `listenPort` when given (the Kafka fault listener advertises 127.0.0.1:9095: a proxy there, forwarding
 * to 127.0.0.1:9094, carries every request of a client that bootstraps at 127.0.0.1:9095).
 */
export class TcpProxy {
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  private cutOff = false;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
    private readonly listenPort = 0,
  ) {}

  async start(): Promise<string> {
    this.server = createServer((client) => {
      if (this.cutOff) {
        client.destroy();
        return;
      }
      const upstream = connect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => this.server!.listen(this.listenPort, '127.0.0.1', resolve));
    return `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Drops every connection through the proxy and refuses new ones until {@link heal}. */
  cut(): void {
    this.cutOff = true;
    for (const s of this.sockets) s.destroy();
  }

  heal(): void {
    this.cutOff = false;
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
