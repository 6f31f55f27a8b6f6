import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { answerError } from './raw-answer';

/**
 * The cap on open HTTP connections of one gateway process (`EVENTMESH_HTTP_MAX_CONNECTIONS`). Node's own
 * `server.maxConnections` drops a connection past it without a word; here a connection past the cap is accepted,
 * and each request on it is answered 503 `OVERLOADED` with `Retry-After` and `connection: close`, so the client
 * learns why and when to come back. Such a connection that sends nothing is closed by the server's headers
 * timeout. WebSocket upgrades are refused the same way (the Fastify hook in instance.ts asks {@link isOver}).
 */
export class ConnectionCap {
  private open = 0;
  private readonly over = new WeakSet<Socket>();
  /** Requests refused because their connection was past the cap, since start. */
  refused = 0;

  constructor(
    private readonly max: number,
    private readonly retryAfterSeconds: number,
  ) {}

  /** Counts the server's connections from now on. */
  attach(server: Server): void {
    server.on('connection', (socket: Socket) => {
      this.open++;
      if (this.open > this.max) this.over.add(socket);
      socket.once('close', () => this.open--);
    });
  }

  get openConnections(): number {
    return this.open;
  }

  /** Whether the request came on a connection opened past the cap. */
  isOver(request: IncomingMessage): boolean {
    return this.over.has(request.socket);
  }

  /** The refusal of a request on a connection past the cap. */
  error(): EventMeshError {
    this.refused++;
    return new EventMeshError(
      ErrorCode.Overloaded,
      `this gateway process has ${this.open} open connections, more than its most of ${this.max}; connect again later`,
      { limit: 'httpConnections', maxConnections: this.max, retryAfterSeconds: this.retryAfterSeconds },
      true,
    );
  }

  /** Answers a request on a connection past the cap and closes the connection (true); false for any other. */
  refuse(request: IncomingMessage, response: ServerResponse): boolean {
    if (!this.over.has(request.socket)) return false;
    // The request body is not read; the connection closes after the answer.
    answerError(response, this.error(), { connection: 'close' });
    return true;
  }
}
