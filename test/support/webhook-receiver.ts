import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** When it arrived (epoch ms). */
  receivedAt: number;
}

/** A webhook sink on a free loopback port that records every request and answers with `status()`. */
export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  /** The status of each answer, decided when it is sent (after the gate and the delay). */
  status: (request: ReceivedRequest) => number = () => 200;
  /**
   * When set, answers wait for it: a sink that has the event but has not acknowledged it yet. A function holds
   * only the requests it returns a promise for.
   */
  gate?: Promise<void> | ((request: ReceivedRequest) => Promise<void> | undefined);
  /** What the sink answers to the validation handshake (OPTIONS) in WebHook-Allowed-Origin; none when undefined. */
  allowedOrigin: string | undefined = '*';
  readonly handshakes: IncomingHttpHeaders[] = [];
  /** Called with every event received, before it is answered. */
  onEvent?: (request: ReceivedRequest) => void;
  /** How long each answer to an event waits (a slow sink). */
  delayMs = 0;
  private server?: Server;
  /** The sink URL, once started. */
  url?: string;

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      if (req.method === 'OPTIONS') {
        this.handshakes.push(req.headers);
        res.writeHead(200, this.allowedOrigin ? { 'WebHook-Allowed-Origin': this.allowedOrigin } : {}).end();
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const received = {
          method: req.method ?? '',
          path: req.url ?? '',
          headers: req.headers,
          body: Buffer.concat(chunks),
          receivedAt: Date.now(),
        };
        this.requests.push(received);
        this.onEvent?.(received);
        const delay = new Promise<void>((resolve) => setTimeout(resolve, this.delayMs));
        const gate = typeof this.gate === 'function' ? this.gate(received) : this.gate;
        void Promise.all([gate, delay]).then(() => res.writeHead(this.status(received)).end());
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
