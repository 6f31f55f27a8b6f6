import type { HttpClient } from '../http';
import { AgentServer, type AgentHandler, type ServeOptions } from './agent';
import { SessionConnection, type StreamingOptions } from './connection';
import { SessionPublisher, SessionSubscription, type SubscribeOptions } from './live';
import { StreamSession, type OpenSessionOptions } from './session';

/**
 * Streaming sessions (`client.streaming()`, docs/streaming-sessions.md), over one WebSocket per client: serve an
 * agent name, open sessions to agents and call them, each answer a stream of chunks under end-to-end flow control.
 *
 * ```ts
 * const streaming = mesh.streaming();
 * await streaming.serve('echo', async (request, { send }) => {
 *   for (const word of request.text().split(' ')) await send(word);
 * });
 * const session = await streaming.openSession('echo');
 * await session.call('hello streaming world').forEach((chunk) => console.log(chunk.toString()));
 * ```
 */
export class Streaming {
  private readonly connection: SessionConnection;

  constructor(http: HttpClient, options: StreamingOptions = {}) {
    this.connection = new SessionConnection(http, options);
  }

  /**
   * Serves `agentId` (a name of your tenant: [A-Za-z0-9._-], up to 128) with `handler`, as one replica: the runtime
   * binds sessions to replicas and sends each session's calls to its own. Resolves once the runtime took it.
   */
  serve(agentId: string, handler: AgentHandler, options?: ServeOptions): Promise<AgentServer> {
    return AgentServer.serve(this.connection, agentId, handler, options);
  }

  /**
   * Opens a session to `agentId`, bound to one of its replicas for its life. Rejects with `AgentNotFoundError` when no
   * replica serves it in your tenant (unless `waitMs` asks to wait for one).
   */
  openSession(agentId: string, options?: OpenSessionOptions): Promise<StreamSession> {
    return StreamSession.open(this.connection, agentId, options);
  }

  /**
   * Opens a publisher to the named session `name` (Mode 2: no agent, nothing to create first): its publications reach
   * every current subscriber, in its order. Nothing is kept beyond the session's short history in memory.
   */
  openSessionPublisher(name: string, options?: { windowBytes?: number }): Promise<SessionPublisher> {
    return SessionPublisher.open(this.connection, name, options);
  }

  /**
   * Subscribes to the named session `name` (one subscription per name per client): its publications from now on, or
   * from `since` when the session's history still holds it (`recovered`).
   */
  subscribeSession(name: string, options?: SubscribeOptions): Promise<SessionSubscription> {
    return SessionSubscription.subscribe(this.connection, name, options);
  }

  /** Ends the connection: every session and served agent on it ends (`SessionClosedError`). */
  close(): void {
    this.connection.close();
  }
}
