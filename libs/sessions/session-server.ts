import type { ServerResponse } from 'node:http';
import type { WebSocket } from 'ws';
import type { SessionsConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { decodeSessionFrame, encodeSessionFrame, SessionFrame, SessionFrameError } from '@libs/frame';
import { createLogger } from '@libs/logging';
import type { Caller, SecurityGate, SessionAction } from '@libs/security';
import type { SessionAgentStore, SessionHomeStore, SessionUsageStore } from '@libs/storage';
import type { ClusterCredential } from '@libs/streams';
import { AGENT_PRESENCE_FRESH_MS, AgentPresence, ReplicaReader } from './agent-presence';
import { LocalReplicas, Replica } from './agent-replicas';
import { CallSessions, SessionMetrics } from './call-sessions';
import type { SessionView } from './session-ends';
import { LiveSessions } from './live-sessions';
import { SessionConnection, sseTransport, webSocketTransport, type ConnectionIdentity } from './session-connection';
import { errorFrame } from './session-errors';
import { SessionLinks } from './session-links';
import { SessionQuotas, TenantSessionUsage } from './session-quotas';
import { SessionUsage } from './session-usage';

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
  /** Each process's quota usage by tenant: the caps hold across the runtime. */
  usage: SessionUsageStore;
  /** The ingress gate: every operation on a connection passes it (its ACL action on the agent or session name). */
  gate: SecurityGate;
  cluster: { holder: string; credential: ClusterCredential };
  /** Whose admins `/admin/sessions` shows every tenant (EVENTMESH_ADMIN_SECURITY_OPERATOR_TENANT). */
  operatorTenant: string;
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
  private usage?: SessionUsage;
  /** SSE connections by id: their clients' frames come by POST, here or through another process. */
  private readonly sse = new Map<string, { connection: SessionConnection; held: Held }>();
  private address?: string;
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
        fromDialer: (link, frame, raw) => {
          if (frame.kind === 'relay') {
            const caller = { tenant: String(frame.attributes.tenant), principal: String(frame.attributes.principal) };
            if (!this.relayed(frame.id, caller, frame.data))
              this.log.warn(
                { connection: frame.id, peer: link.peer },
                'frames posted for an SSE connection not held here; dropped',
              );
            return;
          }
          if (LIVE_KINDS.has(frame.kind) || (frame.kind === 'close' && !link.attached.has(frame.id)))
            this.live.fromMemberLink(link, frame, raw);
          else this.calls.fromCallerLink(link, frame, raw);
        },
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
    this.address = me.address;
    this.presence = new AgentPresence(this.options.store, this.replicas, {
      holder: this.options.cluster.holder,
      ...me,
    });
    this.presence.start();
    this.usage = new SessionUsage(this.options.usage, this.quotas, {
      holder: this.options.cluster.holder,
      instanceId: me.instanceId,
    });
    this.usage.start();
    this.live.start({ holder: this.options.cluster.holder, ...me });
  }

  /** A client's WebSocket whose handshake the gate admitted; `release` gives back what the admission holds. */
  attachClient(socket: WebSocket, identity: ConnectionIdentity, release: () => void): void {
    let id = '';
    const connection = new SessionConnection(
      webSocketTransport(socket, this.options.config.heartbeatMs, () => id),
      identity,
    );
    id = connection.id;
    const held = this.hold(connection, release);
    socket.on('message', (raw: Buffer, binary: boolean) => {
      if (!binary)
        return this.unreadable(connection, new SessionFrameError('a text message: session frames are binary'));
      this.receive(connection, held, raw);
    });
    socket.on('error', (e) => this.log.warn({ connection: connection.id, error: e.message }, 'session socket error'));
    socket.once('close', () => this.closed(connection, held));
  }

  /**
   * A client's Server-Sent Events stream (the fallback), its handshake admitted: its first event names the connection
   * (`event: connection`, `{ "connection": <token> }`), which its client's POSTs carry; then a `frame` event per frame.
   */
  attachSse(response: ServerResponse, identity: ConnectionIdentity, release: () => void): void {
    const connection = new SessionConnection(sseTransport(response, this.options.config.heartbeatMs), identity);
    const held = this.hold(connection, release);
    this.sse.set(connection.id, { connection, held });
    response.write(`event: connection\ndata: ${JSON.stringify({ connection: this.tokenOf(connection) })}\n\n`);
    response.once('close', () => {
      this.sse.delete(connection.id);
      this.closed(connection, held);
    });
  }

  /**
   * Frames a client of the SSE fallback posted (`body`: each frame after its length, a u32): handed to its connection
   * here, or over the link to the process holding it, wherever the load balancer sent the POST. Answers false when the
   * token is not one this runtime made, or names a connection of another caller, or one not open here.
   */
  async post(token: string, caller: Caller, body: Buffer): Promise<boolean> {
    const named = this.openToken(token);
    if (!named) return false;
    if (named.holder === this.options.cluster.holder) return this.relayed(named.connection, caller, body);
    const link = await this.links.to({ holder: named.holder, address: named.address }).catch(() => undefined);
    if (!link)
      throw new EventMeshError(
        ErrorCode.DependencyUnavailable,
        'the instance holding the stream cannot be reached',
        {},
        true,
      );
    link.send(
      encodeSessionFrame({
        kind: 'relay',
        id: named.connection,
        attributes: { tenant: caller.tenant, principal: caller.principal },
        data: body,
      }),
    );
    return true;
  }

  /** A link another process dialed to this one, its cluster token verified. */
  attachLink(socket: WebSocket, peer: string): void {
    if (this.closing) {
      socket.close(1001, 'shutting down');
      return;
    }
    this.links.accept(socket, peer);
  }

  /**
   * The tenants an admin's `/admin/sessions` covers: its own; another one it names, or every tenant (`*`), only for
   * an admin of the operator tenant (403 otherwise).
   */
  tenantsFor(caller: Caller, named: string | undefined): string | undefined {
    if (named === undefined || named === caller.tenant) return caller.tenant;
    if (caller.tenant !== this.options.operatorTenant)
      throw new EventMeshError(
        ErrorCode.Forbidden,
        "only an admin of the operator tenant may see another tenant's sessions",
        { field: 'tenant' },
      );
    return named === '*' ? undefined : named;
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

  /** A tenant's (every tenant's for `undefined`) session quota usage across the runtime, as this process counts it. */
  quotaUsage(tenant: string | undefined): TenantSessionUsage[] {
    return this.quotas.view(tenant);
  }

  /** For /health and the metrics: client connections, sessions by side, replicas, Mode 2's homes and members, links. */
  stats() {
    return {
      connections: this.connections.size,
      sseConnections: this.sse.size,
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
    await this.usage?.close();
  }

  private hold(connection: SessionConnection, release: () => void): Held {
    const held: Held = { served: new Map(), release };
    this.connections.set(connection, held);
    if (this.closing) connection.close(1001, 'shutting down');
    return held;
  }

  private closed(connection: SessionConnection, held: Held): void {
    connection.markEnded();
    if (!this.connections.delete(connection)) return;
    this.calls.connectionClosed(connection, held.served);
    this.live.connectionClosed(connection);
    held.release();
  }

  private receive(connection: SessionConnection, held: Held, raw: Buffer): void {
    let frame: SessionFrame;
    try {
      frame = decodeSessionFrame(raw);
    } catch (e) {
      return this.unreadable(connection, e as Error);
    }
    this.dispatch(connection, held, frame, raw);
  }

  private unreadable(connection: SessionConnection, e: Error): void {
    this.log.warn({ connection: connection.id, error: e.message }, 'unreadable session frame; closing');
    connection.close(1008, `unreadable frame: ${e.message}`.slice(0, 120));
  }

  /** Frames posted for an SSE connection held here, by `caller` (it must be the connection's own). */
  private relayed(id: string, caller: Pick<Caller, 'tenant' | 'principal'>, body: Buffer): boolean {
    const target = this.sse.get(id);
    const who = target?.connection.identity.caller;
    if (!target || who?.tenant !== caller.tenant || who.principal !== caller.principal) return false;
    for (let at = 0; at + 4 <= body.length;) {
      const length = body.readUInt32BE(at);
      const raw = body.subarray(at + 4, at + 4 + length);
      at += 4 + length;
      if (raw.length !== length) {
        this.unreadable(target.connection, new SessionFrameError('a truncated post'));
        return true;
      }
      this.receive(target.connection, target.held, raw);
    }
    return true;
  }

  /** `<payload>.<seal>`: the payload names this process, its address and the connection; the seal is the runtime's. */
  private tokenOf(connection: SessionConnection): string {
    const payload = Buffer.from(
      JSON.stringify({ h: this.options.cluster.holder, a: this.address ?? '', c: connection.id }),
    ).toString('base64url');
    return `${payload}.${this.options.cluster.credential.seal(payload)}`;
  }

  private openToken(token: string): { holder: string; address: string; connection: string } | undefined {
    const at = token.indexOf('.');
    const payload = token.slice(0, at);
    if (at <= 0 || !this.options.cluster.credential.opens(payload, token.slice(at + 1))) return undefined;
    try {
      const named = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as {
        h: string;
        a: string;
        c: string;
      };
      return { holder: named.h, address: named.a, connection: named.c };
    } catch {
      return undefined;
    }
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
