import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on a loopback port whose target a test moves: `moveTo` sends new connections to another server and
 * drops the open ones, as a load balancer that moves a client to another instance does.
 */
export class SwitchProxy {
  private readonly server: Server;
  private readonly open = new Set<Socket>();

  constructor(private targetPort: number) {
    this.server = createServer((client) => {
      const upstream = connect(this.targetPort, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.open.add(s);
        s.on('close', () => this.open.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).on('close', () => client.destroy());
      upstream.pipe(client).on('close', () => upstream.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  moveTo(port: number): void {
    this.targetPort = port;
    for (const s of this.open) s.destroy();
  }

  async close(): Promise<void> {
    for (const s of this.open) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
