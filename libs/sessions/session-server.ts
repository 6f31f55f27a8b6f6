import type { WebSocket } from 'ws';
import type { SessionsConfig } from '../config';
import { ErrorCode, EventMeshError } from '../errors';
import { decodeSessionFrame, SessionFrame, SessionFrameError } from '../frame';
import { createLogger } from '../logging';
import type { SecurityGate, SessionAction } from '../security';
import type { SessionAgentStore, SessionHomeStore } from '../storage';
import type { ClusterCredential } from '../streams';
import { AGENT_PRESENCE_FRESH_MS, AgentPresence, ReplicaReader } from './agent-presence';
import { LocalReplicas, Replica } from './agent-replicas';
import { CallSessions, SessionMetrics, SessionView } from './call-sessions';
import { LiveSessions } from './live-sessions';
import { SessionConnection, type ConnectionIdentity } from './session-connection';
import { errorFrame } from './session-errors';
import { SessionLinks } from './session-links';
import { SessionQuotas } from './session-quotas';

/** An agent replica as `/admin/sessions` lists it. */
export interface ReplicaView {
  replica: string;
  instance: string;
  holder: string;
  since: string;
  sessions: number;
  bytes: number;
  chunks: number;
  stalls: number;
  /** Its open sessions (up to 50 per replica from another process). */
  openSessions: SessionView[];
}

export interface AgentView {
  tenant: string;
  agent: string;
  replicas: ReplicaView[];
}

export interface SessionServerOptions {
  config: SessionsConfig;
  store: SessionAgentStore;
  homes: SessionHomeStore;
  /** The ingress gate: every operation on a connection passes it (its ACL action on the agent or session name). */
  gate: SecurityGate;
  cluster: { holder: string; credential: ClusterCredential };
  metrics?: SessionMetrics;
}

/** What one client connection holds besides its sessions as a caller: the agent names it serves. */
interface Held {
  served: Map<string, Replica>;
  release(): void;
}

/** The kinds only Mode 2 sends from a member process to a session's home. */
const LIVE_KINDS = new Set(['subscribe', 'unsubscribe', 'publisher', 'publish']);

/** The most bytes of a frame a link carries: a request, its header and attributes. */
const FRAME_MARGIN_BYTES = 32 * 1024;

/**
 * Streaming sessions in one gateway process (docs/streaming-sessions.md): the clients' connections to
 * `/sessions/ws` and the links between processes, each frame handed to Mode 1 (call-sessions.ts) by its kind. The
 * agent replicas held here are published for the other instances (agent-presence.ts). Nothing here touches Kafka,
 * Temporal or, per frame, Postgres.
 */
export class SessionServer {
  private readonly log = createLogger('SessionServer');
  private readonly connections = new Map<SessionConnection, Held>();
  readonly replicas = new LocalReplicas();
  readonly links: SessionLinks;
  readonly calls: CallSessions;
  readonly live: LiveSessions;
  readonly quotas: SessionQuotas;
  private presence?: AgentPresence;
  private closing = false;

  constructor(private readonly options: SessionServerOptions) {
    const { config, cluster } = options;
    this.quotas = new SessionQuotas(config);
    this.links = new SessionLinks(
      cluster.credential,
      cluster.holder,
      { heartbeatMs: config.heartbeatMs, maxPayload: this.maxFrameBytes },
      {
        // A dialed link carries what comes back from agent replicas (Mode 1) and from session homes (Mode 2).
        fromDialed: (link, frame, raw) =>
          this.live.ownsHomeFrame(frame.id)
            ? this.live.fromHomeLink(link, frame)
            : this.calls.fromAgentLink(link, frame, raw),
        // A link dialed here carries callers' frames for replicas here (Mode 1) and members' for homes here (Mode 2).
        fromDialer: (link, frame, raw) =>
          LIVE_KINDS.has(frame.kind) || (frame.kind === 'close' && !link.attached.has(frame.id))
            ? this.live.fromMemberLink(link, frame, raw)
            : this.calls.fromCallerLink(link, frame, raw),
      },
    );
    this.calls = new CallSessions({
      config,
      replicas: this.replicas,
      reader: new ReplicaReader(options.store),
      links: this.links,
      self: cluster.holder,
      quotas: this.quotas,
      admit: (connection, action, name) => this.admit(connection, action, name),
      metrics: options.metrics,
    });
    this.live = new LiveSessions({
      config,
      store: options.homes,
      links: this.links,
      quotas: this.quotas,
      admit: (connection, action, name) => this.admit(connection, action, name),
      metrics: options.metrics,
    });
  }

  /** The largest message a client or a link may send: a request with its frame around it. */
  get maxFrameBytes(): number {
    return this.options.config.maxRequestBytes + FRAME_MARGIN_BYTES;
  }

  /** Publishes this process's agent replicas for the others, now that it knows its address. */
  start(me: { instanceId: string; address: string }): void {
    this.presence = new AgentPresence(this.options.store, this.replicas, {
      holder: this.options.cluster.holder,
      ...me,
    });
    this.presence.start();
    this.live.start({ holder: this.options.cluster.holder, ...me });
  }

  /** A client's WebSocket whose handshake the gate admitted; `release` gives back what the admission holds. */
  attachClient(socket: WebSocket, identity: ConnectionIdentity, release: () => void): void {
    const connection = new SessionConnection(socket, identity, this.options.config.heartbeatMs);
    const held: Held = { served: new Map(), release };
    this.connections.set(connection, held);
    if (this.closing) connection.close(1001, 'shutting down');
    socket.on('message', (raw: Buffer, binary: boolean) => {
      let frame: SessionFrame;
      try {
        if (!binary) throw new SessionFrameError('a text message: session frames are binary');
        frame = decodeSessionFrame(raw);
      } catch (e) {
        this.log.warn({ connection: connection.id, error: (e as Error).message }, 'unreadable session frame; closing');
        connection.close(1008, `unreadable frame: ${(e as Error).message}`.slice(0, 120));
        return;
      }
      this.dispatch(connection, held, frame, raw);
    });
    socket.on('error', (e) => this.log.warn({ connection: connection.id, error: e.message }, 'session socket error'));
    socket.once('close', () => {
      connection.markEnded();
      this.connections.delete(connection);
      this.calls.connectionClosed(connection, held.served);
      this.live.connectionClosed(connection);
      held.release();
    });
  }

  /** A link another process dialed to this one, its cluster token verified. */
  attachLink(socket: WebSocket, peer: string): void {
    if (this.closing) {
      socket.close(1001, 'shutting down');
      return;
    }
    this.links.accept(socket, peer);
  }

  /** The agents of a tenant (every tenant's for `undefined`) with their replicas across the cluster and their sessions. */
  async agents(tenant: string | undefined): Promise<AgentView[]> {
    const rows = await this.options.store.list(tenant, AGENT_PRESENCE_FRESH_MS);
    const self = this.options.cluster.holder;
    const live = new Map(this.replicas.all().map((r) => [r.id, r]));
    const byAgent = new Map<string, AgentView>();
    for (const row of rows) {
      const key = `${row.tenant}\u0000${row.agent}`;
      let view = byAgent.get(key);
      if (!view) byAgent.set(key, (view = { tenant: row.tenant, agent: row.agent, replicas: [] }));
      const here = row.holder === self ? live.get(row.replicaId) : undefined;
      const stats = row.stats as { bytes?: number; chunks?: number; stalls?: number; openSessions?: SessionView[] };
      view.replicas.push({
        replica: row.replicaId,
        instance: row.instanceId,
        holder: row.holder,
        since: row.since,
        sessions: here ? here.sessions.size : row.sessions,
        bytes: here ? here.bytes : (stats.bytes ?? 0),
        chunks: here ? here.chunks : (stats.chunks ?? 0),
        stalls: here ? here.stalls : (stats.stalls ?? 0),
        openSessions: here ? [...here.sessions.values()].map((s) => s.view()) : (stats.openSessions ?? []),
      });
    }
    return [...byAgent.values()];
  }

  /** For /health and the metrics: client connections, sessions by side, replicas, Mode 2's homes and members, links. */
  stats() {
    return {
      connections: this.connections.size,
      ...this.calls.stats(),
      live: this.live.stats(),
      links: this.links.stats(),
    };
  }

  /** Ends every client connection (1001: their sessions end, the SDK reconnects elsewhere), the links and the presence. */
  async close(): Promise<void> {
    this.closing = true;
    for (const connection of this.connections.keys()) connection.close(1001, 'shutting down');
    await this.live.close();
    this.links.close();
    await this.presence?.close();
  }

  private dispatch(connection: SessionConnection, held: Held, frame: SessionFrame, raw: Buffer): void {
    switch (frame.kind) {
      case 'serve':
        void this.calls.serve(connection, frame, held.served);
        return;
      case 'unserve':
        this.calls.unserve(frame, held.served);
        return;
      case 'open':
        void this.calls.open(connection, frame);
        return;
      case 'request':
      case 'cancel':
        this.calls.fromCaller(connection, frame, raw);
        return;
      case 'credit':
        // A caller's (Mode 1: `<agent>:<uuid>`) or a subscriber's (Mode 2: the session's name).
        if (frame.id.includes(':')) this.calls.fromCaller(connection, frame, raw);
        else this.live.credit(connection, frame);
        return;
      case 'close':
        // A caller closing its session, a publisher closing, or an agent ending a session bound to it.
        if (this.calls.isCaller(connection, frame.id)) this.calls.fromCaller(connection, frame, raw);
        else if (this.live.isPublisher(connection, frame.id)) this.live.closePublisher(connection, frame);
        else this.calls.fromAgent(held.served, frame, raw);
        return;
      case 'subscribe':
        void this.live.subscribe(connection, frame);
        return;
      case 'unsubscribe':
        this.live.unsubscribe(connection, frame);
        return;
      case 'publisher':
        void this.live.openPublisher(connection, frame);
        return;
      case 'publish':
        this.live.publish(connection, frame, raw);
        return;
      case 'chunk':
      case 'end':
      case 'error':
        this.calls.fromAgent(held.served, frame, raw);
        return;
      default:
        connection.send(
          errorFrame(
            frame.id,
            frame.call,
            new EventMeshError(ErrorCode.InvalidRequest, `a client does not send ${frame.kind} frames`),
            'call',
          ),
        );
    }
  }

  private async admit(connection: SessionConnection, action: SessionAction, name: string) {
    const { headers, remoteAddress } = connection.identity;
    const admission = await this.options.gate.admit({
      route: `SESSION ${action}`,
      action,
      topic: name,
      headers,
      remoteAddress,
    });
    return admission.caller;
  }
}
