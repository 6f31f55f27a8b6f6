import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP reverse proxy on a loopback port that passes every request (streamed both ways, so SSE and long-poll
 * work through it) but refuses every WebSocket upgrade with a 502, as proxies that do not carry WebSockets do.
 * `upgradesRefused` counts the refusals. With `refuseEventStreams`, it refuses Server-Sent Events requests too
 * (`Accept: text/event-stream`) with a 502 (`eventStreamsRefused`), as proxies that cannot stream do. With
 * `postsTo`, it sends POSTs to that other target (`postsElsewhere` counts them), as a load balancer in front of
 * several instances may: a client's answers then reach an instance other than the one holding its stream.
 */
export class NoUpgradeProxy {
  upgradesRefused = 0;
  eventStreamsRefused = 0;
  postsElsewhere = 0;
  private readonly server: http.Server;

  constructor(
    private readonly target: string,
    { refuseEventStreams = false, postsTo }: { refuseEventStreams?: boolean; postsTo?: string } = {},
  ) {
    this.server = http.createServer((req, res) => {
      if (refuseEventStreams && (req.headers.accept ?? '').includes('text/event-stream')) {
        this.eventStreamsRefused++;
        return void res.writeHead(502, { 'content-type': 'text/plain' }).end('no streaming here');
      }
      const elsewhere = postsTo !== undefined && req.method === 'POST';
      if (elsewhere) this.postsElsewhere++;
      const upstream = http.request(
        new URL(req.url ?? '/', elsewhere ? postsTo : this.target),
        { method: req.method, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.destroy());
      res.on('close', () => upstream.destroy());
      req.pipe(upstream);
    });
    this.server.on('upgrade', (_req, socket) => {
      this.upgradesRefused++;
      socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
