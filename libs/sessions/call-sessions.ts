import type { SessionsConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { encodeSessionFrame, SessionFrame } from '@libs/frame';
import { createLogger } from '@libs/logging';
import type { Caller, SessionAction } from '@libs/security';
import type { SessionAgentRow } from '@libs/storage';
import type { ReplicaReader } from './agent-presence';
import { LocalReplicas, Replica } from './agent-replicas';
import { AgentEnd, CallerEnd } from './session-ends';
import { ReplicaPicker } from './replica-picker';
import { agentGone, errorAttributes, errorFrame } from './session-errors';
import type { SessionLink, SessionLinks } from './session-links';
import { checkName, nameOfSessionId } from './session-names';
import type { SessionConnection } from './session-connection';
import type { SessionQuotas } from './session-quotas';

/** Replicas an open tries when the one it picked turns out to be gone before anything ran. */
const OPEN_TRIES = 3;

/** What the sessions record in the instance's metrics (RuntimeMetrics implements it). */
export interface SessionMetrics {
  sessionOpened(outcome: string): void;
  sessionChunk(bytes: number): void;
  sessionStall(): void;
  sessionError(code: string): void;
}

export interface CallSessionsDeps {
  config: SessionsConfig;
  replicas: LocalReplicas;
  reader: ReplicaReader;
  links: SessionLinks;
  /** This process's holder id (its own presence rows are its local replicas). */
  self: string;
  quotas: SessionQuotas;
  /** Runs the request gate for one operation of a connection (its ACL action on `name`); throws the refusal. */
  admit(connection: SessionConnection, action: SessionAction, name: string): Promise<Caller>;
  metrics?: SessionMetrics;
}

/** An open that may try another replica: nothing ran on the one it picked. */
class RetryOpen extends EventMeshError {}

/**
 * Mode 1, the streaming call (docs/streaming-sessions.md): a client opens `<agent>:<uuid>` on its connection, the
 * runtime picks a replica of the agent once (here or on another process, the least loaded) and remembers it for the
 * session's life; then every frame of the session goes straight to that replica, over the sessions link when it is
 * elsewhere, with no lookup. The replica's side holds the credit window and refuses a chunk beyond it; the caller's
 * side forwards. A caller's disconnect closes its sessions (the agent sees the cancel); a replica's disconnect, or the
 * loss of the link to it, ends its sessions with AGENT_GONE. Nothing is retried once a call ran: a call's side effects
 * must not repeat.
 */
export class CallSessions {
  private readonly log = createLogger('CallSessions');
  /** Sessions whose caller is connected here, by id (unique on this process: a second open of an id is refused). */
  private readonly callers = new Map<string, CallerEnd>();
  /** Opens the gate is deciding, by id: the connection that asked (a close meanwhile deletes it). */
  private readonly admitting = new Map<string, SessionConnection>();
  /** Sessions open on this process's replicas whose caller is on this process too, or came over a link. */
  private agentEnds = 0;
  private readonly picker: ReplicaPicker;

  constructor(private readonly deps: CallSessionsDeps) {
    this.picker = new ReplicaPicker(deps.replicas, deps.reader, deps.links, deps.self);
  }

  /** Whether `id` is a session this connection opened as a caller. */
  isCaller(connection: SessionConnection, id: string): boolean {
    return (this.callers.get(id)?.connection ?? this.admitting.get(id)) === connection;
  }

  stats(): { callers: number; agentSessions: number; replicas: number } {
    return { callers: this.callers.size, agentSessions: this.agentEnds, replicas: this.deps.replicas.all().length };
  }

  // ---- serving an agent name -------------------------------------------------------------------------------

  async serve(connection: SessionConnection, frame: SessionFrame, served: Map<string, Replica>): Promise<void> {
    const name = frame.id;
    try {
      checkName(name, 'agent');
      if (served.has(name))
        throw new EventMeshError(ErrorCode.SessionExists, `this connection already serves agent ${name}`);
      const caller = await this.deps.admit(connection, 'agent.serve', name);
      if (!connection.open) return;
      const release = this.deps.quotas.serveAgent(caller.tenant);
      const replica = new Replica(caller.tenant, name, connection, release);
      served.set(name, replica);
      this.deps.replicas.add(replica);
      connection.send(encodeSessionFrame({ kind: 'served', id: name, attributes: { replica: replica.id } }));
      this.log.info({ tenant: caller.tenant, agent: name, replica: replica.id }, 'session agent replica serving');
    } catch (e) {
      connection.send(errorFrame(name, 0, e, 'open'));
    }
  }

  /** Stops taking new sessions for a name; those open go on until they close (a replica draining). */
  unserve(frame: SessionFrame, served: Map<string, Replica>): void {
    const replica = served.get(frame.id);
    if (!replica) return;
    this.deps.replicas.remove(replica);
    replica.release();
  }

  // ---- the caller's side -----------------------------------------------------------------------------------

  async open(connection: SessionConnection, frame: SessionFrame): Promise<void> {
    const id = frame.id;
    let agent: string;
    try {
      agent = nameOfSessionId(id);
      if (this.callers.has(id) || this.admitting.has(id))
        throw new EventMeshError(ErrorCode.SessionExists, `session ${id} is already open`);
    } catch (e) {
      connection.send(errorFrame(id, 0, e, 'open'));
      return;
    }
    const { windowBytes, maxWindowBytes, maxChunkBytes, maxWaitMs } = this.deps.config;
    const window = clamp(frame.n > 0 ? Math.floor(frame.n) : windowBytes, maxChunkBytes, maxWindowBytes);
    // Admitted (the gate, then the quota) before anything is allocated for the session: meanwhile only its id is
    // known, so that a second open of it is refused and a close of it is heard.
    let who: Caller;
    let release: () => void;
    this.admitting.set(id, connection);
    try {
      who = await this.deps.admit(connection, 'agent.call', agent);
      if (this.admitting.get(id) !== connection || !connection.open) return;
      release = this.deps.quotas.openSession(who.tenant, window);
    } catch (e) {
      this.refused(connection, id, e);
      return;
    } finally {
      this.admitting.delete(id);
    }
    const caller = new CallerEnd(id, agent, connection, window, (c) => this.callerLinkLost(c));
    caller.tenant = who.tenant;
    caller.principal = who.principal;
    caller.release = release;
    this.callers.set(id, caller);
    try {
      const waitMs = Math.min(maxWaitMs, Math.max(0, Number(frame.attributes.waitMs ?? 0) || 0));
      await this.bind(caller, waitMs);
      // Ended while it opened (the caller closed it, or its connection went): what was bound is closed.
      if (ended(caller)) {
        this.closeTarget(caller);
        return;
      }
      caller.state = 'open';
      connection.send(
        encodeSessionFrame({ kind: 'opened', id, n: caller.window, attributes: { maxChunk: maxChunkBytes } }),
      );
      this.deps.metrics?.sessionOpened('opened');
    } catch (e) {
      // Nothing is bound when the bind failed (a remote open that failed was let go of where it failed).
      const live = caller.state !== 'ended';
      this.forgetCaller(caller);
      if (live) this.refused(connection, id, e);
    }
  }

  /** An open that failed: counted by its code and answered with an error frame (nothing was opened). */
  private refused(connection: SessionConnection, id: string, e: unknown): void {
    const code = e instanceof EventMeshError ? e.code : ErrorCode.Internal;
    this.deps.metrics?.sessionOpened(code.toLowerCase());
    if (!(e instanceof EventMeshError)) this.log.error({ session: id, error: (e as Error).message }, 'open failed');
    connection.send(errorFrame(id, 0, e, 'open'));
  }

  /** A frame from the caller for a session it opened: request, cancel, credit or close. */
  fromCaller(connection: SessionConnection, frame: SessionFrame, raw: Buffer): void {
    const caller = this.callers.get(frame.id);
    if (!caller && frame.kind === 'close' && this.admitting.get(frame.id) === connection) {
      this.admitting.delete(frame.id);
      return;
    }
    if (!caller || caller.connection !== connection) {
      if (frame.kind !== 'close' && frame.kind !== 'credit' && frame.kind !== 'cancel')
        connection.send(
          errorFrame(
            frame.id,
            frame.call,
            new EventMeshError(ErrorCode.SessionNotFound, `session ${frame.id} is not open`),
            'session',
          ),
        );
      return;
    }
    if (caller.state !== 'open') {
      if (frame.kind === 'close') this.forgetCaller(caller);
      else
        connection.send(
          errorFrame(
            frame.id,
            frame.call,
            new EventMeshError(ErrorCode.SessionNotFound, `session ${frame.id} is not open yet`),
            'call',
          ),
        );
      return;
    }
    if (frame.kind === 'request' && frame.data.length > this.deps.config.maxRequestBytes) {
      connection.send(
        errorFrame(
          frame.id,
          frame.call,
          new EventMeshError(
            ErrorCode.PayloadTooLarge,
            `a request is at most ${this.deps.config.maxRequestBytes} bytes (EVENTMESH_SESSIONS_MAX_REQUEST_BYTES)`,
            { limit: this.deps.config.maxRequestBytes },
          ),
          'call',
        ),
      );
      return;
    }
    this.toAgent(caller, frame, raw);
    if (frame.kind === 'close') this.forgetCaller(caller);
  }

  /** A frame that came back over a link this process dialed: the agent's side of a session of one of its callers. */
  fromAgentLink(link: SessionLink, frame: SessionFrame, raw: Buffer): void {
    const caller = this.callers.get(frame.id);
    if (!caller || caller.target?.kind !== 'remote' || caller.target.link !== link) return;
    if (caller.state === 'opening') {
      if (frame.kind === 'opened' || frame.kind === 'error') caller.pending?.settle(frame);
      return;
    }
    if (frame.kind !== 'chunk' && frame.kind !== 'end' && frame.kind !== 'error') return;
    caller.connection.send(raw);
    if (frame.kind === 'error' && frame.attributes.scope === 'session') this.forgetCaller(caller);
  }

  // ---- the agent's side ------------------------------------------------------------------------------------

  /** A frame from a replica's connection for one of its sessions: chunk, end, error, or close (the agent ends it). */
  fromAgent(served: Map<string, Replica>, frame: SessionFrame, raw: Buffer): void {
    const at = frame.id.indexOf(':');
    const end = served.get(frame.id.slice(0, at))?.sessions.get(frame.id);
    // A session that ended meanwhile (closed by its caller, failed): what its agent still sends is dropped.
    if (!end) return;
    const replica = end.replica;
    if (frame.kind === 'close') {
      this.forgetAgentEnd(end);
      this.deps.metrics?.sessionError(ErrorCode.AgentGone.toLowerCase());
      end.failCaller(agentGone(`the replica of agent ${replica.agent} ended the session`));
      return;
    }
    if (frame.kind === 'chunk') {
      const bytes = frame.data.length;
      if (frame.call === 0 || frame.call !== end.activeCall) {
        // A chunk of a call that was cancelled (or is over): dropped here, and its credit given back to the agent,
        // which counted it when it sent it.
        if (bytes > 0) replica.connection.send(encodeSessionFrame({ kind: 'credit', id: end.id, n: bytes }));
        return;
      }
      const stalls = end.credit.stalls;
      if (bytes > end.maxChunk || !end.credit.take(bytes)) {
        this.violation(end, bytes);
        return;
      }
      end.bytes += bytes;
      end.chunks++;
      replica.bytes += bytes;
      replica.chunks++;
      this.deps.metrics?.sessionChunk(bytes);
      if (end.credit.stalls > stalls) {
        replica.stalls++;
        this.deps.metrics?.sessionStall();
      }
      end.toCaller(raw);
      return;
    }
    if ((frame.kind === 'end' || frame.kind === 'error') && frame.call !== 0 && frame.call === end.activeCall) {
      end.activeCall = 0;
      if (frame.kind === 'end') return end.toCaller(raw);
      const message = typeof frame.attributes.message === 'string' ? frame.attributes.message : 'the agent failed';
      this.deps.metrics?.sessionError(ErrorCode.AgentError.toLowerCase());
      end.toCaller(errorFrame(end.id, frame.call, new EventMeshError(ErrorCode.AgentError, message), 'call'));
    }
  }

  /** A frame that came over a link another process dialed: the caller's side of a session on a replica here. */
  fromCallerLink(link: SessionLink, frame: SessionFrame, raw: Buffer): void {
    if (frame.kind === 'open') return this.openFromLink(link, frame);
    const end = link.attached.get(frame.id);
    if (end instanceof AgentEnd) this.agentFromCaller(end, frame, raw);
  }

  // ---- a connection or a link ending -----------------------------------------------------------------------

  /** The connection closed: its sessions as a caller are closed (their agents see the cancel), its replicas gone. */
  connectionClosed(connection: SessionConnection, served: Map<string, Replica>): void {
    for (const caller of [...this.callers.values()]) {
      if (caller.connection !== connection) continue;
      const open = caller.state === 'open';
      this.forgetCaller(caller);
      if (open) this.closeTarget(caller, 'disconnected');
    }
    for (const replica of served.values()) {
      this.deps.replicas.remove(replica);
      replica.release();
      for (const end of [...replica.sessions.values()]) {
        this.forgetAgentEnd(end);
        this.deps.metrics?.sessionError(ErrorCode.AgentGone.toLowerCase());
        end.failCaller(agentGone(`the replica of agent ${replica.agent} serving this session disconnected`));
      }
    }
    served.clear();
  }

  // ---- internals -------------------------------------------------------------------------------------------

  /** Binds the session to a replica: the least loaded, here or elsewhere, waiting up to `waitMs` for one. */
  private async bind(caller: CallerEnd, waitMs: number): Promise<void> {
    const deadline = Date.now() + waitMs;
    const excluded = new Set<string>();
    for (let tries = 0; ;) {
      const pick = await this.picker.pick(caller.tenant, caller.agent, excluded);
      if (caller.state === 'ended') return;
      if (!pick) {
        if (Date.now() >= deadline)
          throw new EventMeshError(
            ErrorCode.SessionAgentNotFound,
            `no replica of agent ${caller.agent} is serving${waitMs > 0 ? ` (waited ${waitMs} ms)` : ''}`,
            { agent: caller.agent },
          );
        await this.picker.replicaChange(deadline);
        continue;
      }
      if (pick.replica) return this.bindLocal(caller, pick.replica);
      try {
        return await this.bindRemote(caller, pick.row);
      } catch (e) {
        if (!(e instanceof RetryOpen) || ++tries >= OPEN_TRIES) throw e;
        excluded.add(pick.row.replicaId);
        this.picker.forget(caller.tenant, caller.agent);
      }
    }
  }

  private bindLocal(caller: CallerEnd, replica: Replica): void {
    if (replica.sessions.has(caller.id))
      throw new EventMeshError(ErrorCode.SessionExists, `session ${caller.id} is already open`);
    const end = this.newAgentEnd(
      caller.id,
      replica,
      caller.window,
      this.deps.config.maxChunkBytes,
      (raw) => caller.connection.send(raw),
      (e) => {
        this.forgetCaller(caller);
        caller.connection.send(errorFrame(caller.id, 0, e, 'session'));
      },
      undefined,
    );
    caller.target = { kind: 'local', end };
    replica.connection.send(
      encodeSessionFrame({
        kind: 'open',
        id: caller.id,
        n: caller.window,
        attributes: { maxChunk: end.maxChunk, caller: caller.principal },
      }),
    );
  }

  private async bindRemote(caller: CallerEnd, row: SessionAgentRow): Promise<void> {
    // Counted at once, before the link is ready: the opens picking meanwhile see this one's share of the load.
    this.picker.route(row.replicaId);
    let link: SessionLink;
    try {
      link = await this.deps.links.to({ holder: row.holder, address: row.address });
    } catch (e) {
      this.picker.unroute(row.replicaId);
      throw new RetryOpen(
        ErrorCode.AgentGone,
        `the instance holding the replica cannot be reached: ${(e as Error).message}`,
      );
    }
    caller.target = { kind: 'remote', link, replicaId: row.replicaId, holder: row.holder };
    link.attached.set(caller.id, caller);
    if (ended(caller)) return this.detachRemote(caller);
    const failed = (e: EventMeshError): never => {
      // The replica's process may have opened it (an answer later than the timeout): it is closed there.
      link.send(encodeSessionFrame({ kind: 'close', id: caller.id }));
      this.detachRemote(caller);
      throw e;
    };
    const answer = await new Promise<SessionFrame | EventMeshError>((resolve) => {
      const timer = setTimeout(
        () =>
          resolve(
            new EventMeshError(
              ErrorCode.AgentGone,
              `the instance holding the replica did not answer the open within ${this.deps.config.openTimeoutMs} ms`,
            ),
          ),
        this.deps.config.openTimeoutMs,
      );
      caller.pending = {
        settle: (a) => {
          clearTimeout(timer);
          caller.pending = undefined;
          resolve(a);
        },
      };
      link.send(
        encodeSessionFrame({
          kind: 'open',
          id: caller.id,
          n: caller.window,
          attributes: {
            tenant: caller.tenant,
            replica: row.replicaId,
            maxChunk: this.deps.config.maxChunkBytes,
            caller: caller.principal,
          },
        }),
      );
    });
    if (answer instanceof EventMeshError) return failed(answer);
    if (answer.kind === 'error') {
      const a = answer.attributes;
      const code = (Object.values(ErrorCode) as string[]).includes(String(a.code))
        ? (a.code as ErrorCode)
        : ErrorCode.AgentGone;
      const error = a.retry === true ? RetryOpen : EventMeshError;
      return failed(new error(code, typeof a.message === 'string' ? a.message : 'the open was refused'));
    }
    caller.window = answer.n;
  }

  /** On the replica's process: an open that came over a link (the caller's process picked a replica here). */
  private openFromLink(link: SessionLink, frame: SessionFrame): void {
    const { tenant, replica: replicaId, maxChunk: askedChunk, caller } = frame.attributes;
    const replica = this.deps.replicas.get(String(replicaId));
    const refuse = (e: EventMeshError, retry: boolean) => {
      const attributes = { ...errorAttributes(e, 'open'), ...(retry ? { retry: true } : {}) };
      link.send(encodeSessionFrame({ kind: 'error', id: frame.id, attributes }));
    };
    let agent: string;
    try {
      agent = nameOfSessionId(frame.id);
    } catch (e) {
      return refuse(e as EventMeshError, false);
    }
    if (!replica || replica.tenant !== tenant || replica.agent !== agent || !replica.connection.open)
      return refuse(agentGone(`the replica of agent ${agent} is not connected here any more`), true);
    if (replica.sessions.has(frame.id) || link.attached.has(frame.id))
      return refuse(new EventMeshError(ErrorCode.SessionExists, `session ${frame.id} is already open`), false);
    const { maxChunkBytes, maxWindowBytes } = this.deps.config;
    const chunk = Math.min(maxChunkBytes, Math.max(16, Number(askedChunk) || maxChunkBytes));
    const window = clamp(Math.floor(frame.n), chunk, maxWindowBytes);
    this.newAgentEnd(
      frame.id,
      replica,
      window,
      chunk,
      (raw) => link.send(raw),
      (e) => link.send(errorFrame(frame.id, 0, e, 'session')),
      link,
    );
    replica.connection.send(
      encodeSessionFrame({
        kind: 'open',
        id: frame.id,
        n: window,
        attributes: { maxChunk: chunk, caller: String(caller ?? '') },
      }),
    );
    link.send(encodeSessionFrame({ kind: 'opened', id: frame.id, n: window }));
  }

  private newAgentEnd(
    id: string,
    replica: Replica,
    window: number,
    maxChunk: number,
    toCaller: (raw: Buffer) => void,
    failCaller: (e: EventMeshError) => void,
    link: SessionLink | undefined,
  ): AgentEnd {
    const end = new AgentEnd(id, replica, window, maxChunk, toCaller, failCaller, link, (e) => {
      // The caller's process went away: the agent sees the cancel of a call under way, then the close.
      this.forgetAgentEnd(e);
      this.closeOnAgent(e, 'disconnected');
    });
    replica.sessions.set(id, end);
    link?.attached.set(id, end);
    this.agentEnds++;
    return end;
  }

  /** A frame from the caller's side for a session on a replica here. */
  private agentFromCaller(end: AgentEnd, frame: SessionFrame, raw: Buffer): void {
    const agent = end.replica.connection;
    switch (frame.kind) {
      case 'request':
        if (end.activeCall !== 0) {
          end.toCaller(
            errorFrame(
              end.id,
              frame.call,
              new EventMeshError(ErrorCode.SessionBusy, `call ${end.activeCall} of session ${end.id} is under way`),
              'call',
            ),
          );
          return;
        }
        if (frame.call <= end.lastCall) {
          end.toCaller(
            errorFrame(
              end.id,
              frame.call,
              new EventMeshError(ErrorCode.InvalidRequest, 'a call is numbered above the calls before it', {
                field: 'call',
              }),
              'call',
            ),
          );
          return;
        }
        end.activeCall = end.lastCall = frame.call;
        agent.send(raw);
        return;
      case 'cancel':
        if (frame.call !== 0 && frame.call === end.activeCall) {
          end.activeCall = 0;
          agent.send(raw);
        }
        return;
      case 'credit': {
        const given = end.credit.give(frame.n);
        if (given > 0)
          agent.send(given === frame.n ? raw : encodeSessionFrame({ kind: 'credit', id: end.id, n: given }));
        return;
      }
      case 'close':
        this.forgetAgentEnd(end);
        this.closeOnAgent(end, frame.attributes.reason === 'disconnected' ? 'disconnected' : 'closed');
        return;
      default:
        return;
    }
  }

  /** The agent sent past its credit (or a chunk above the largest): the session ends on both sides. */
  private violation(end: AgentEnd, bytes: number): void {
    const message =
      bytes > end.maxChunk
        ? `a chunk of ${bytes} bytes is above the largest chunk (${end.maxChunk} bytes)`
        : `a chunk of ${bytes} bytes is past the session's credit (${end.credit.available} of ${end.window} bytes left)`;
    this.log.warn(
      { session: end.id, agent: end.replica.agent, bytes },
      `flow-control violation by the agent: ${message}`,
    );
    this.deps.metrics?.sessionError(ErrorCode.FlowControlViolation.toLowerCase());
    this.forgetAgentEnd(end);
    end.replica.connection.send(
      errorFrame(end.id, end.activeCall, new EventMeshError(ErrorCode.FlowControlViolation, message), 'session'),
    );
    end.failCaller(new EventMeshError(ErrorCode.FlowControlViolation, `the agent broke flow control: ${message}`));
  }

  /**
   * Tells the agent a session is over: the cancel of its call under way, then the close, both saying why (`closed`:
   * its caller closed it; `disconnected`: the caller's connection, or the link to its instance, went away).
   */
  private closeOnAgent(end: AgentEnd, reason: 'closed' | 'disconnected'): void {
    const agent = end.replica.connection;
    const attributes = { reason };
    if (end.activeCall !== 0)
      agent.send(encodeSessionFrame({ kind: 'cancel', id: end.id, call: end.activeCall, attributes }));
    agent.send(encodeSessionFrame({ kind: 'close', id: end.id, attributes }));
  }

  private forgetAgentEnd(end: AgentEnd): void {
    if (end.ended) return;
    end.ended = true;
    this.agentEnds--;
    end.replica.sessions.delete(end.id);
    if (end.link?.attached.get(end.id) === end) end.link.attached.delete(end.id);
  }

  /** Hands a caller's frame to its session's replica: on this process, or over the link to the one holding it. */
  private toAgent(caller: CallerEnd, frame: SessionFrame, raw: Buffer): void {
    const target = caller.target;
    if (target?.kind === 'local') this.agentFromCaller(target.end, frame, raw);
    else target?.link.send(raw);
  }

  /** Closes what a session was bound to: its caller closed it, or went away (`disconnected`). */
  private closeTarget(caller: CallerEnd, reason: 'closed' | 'disconnected' = 'closed'): void {
    const target = caller.target;
    if (target?.kind === 'local') {
      this.forgetAgentEnd(target.end);
      this.closeOnAgent(target.end, reason);
    } else target?.link.send(encodeSessionFrame({ kind: 'close', id: caller.id, attributes: { reason } }));
  }

  /** Lets go of the link a session was bound over (and of its share of the remote replica's load). */
  private detachRemote(caller: CallerEnd): void {
    const target = caller.target;
    if (target?.kind !== 'remote') return;
    caller.target = undefined;
    if (target.link.attached.get(caller.id) === caller) target.link.attached.delete(caller.id);
    this.picker.unroute(target.replicaId);
  }

  private forgetCaller(caller: CallerEnd): void {
    if (caller.state === 'ended') return;
    caller.state = 'ended';
    if (this.callers.get(caller.id) === caller) this.callers.delete(caller.id);
    caller.release();
    caller.pending?.settle(new EventMeshError(ErrorCode.SessionNotFound, `session ${caller.id} was closed`));
    // A remote target stays named (a close still goes over its link); it no longer counts on the link or the replica.
    const target = caller.target;
    this.detachRemote(caller);
    caller.target = target;
  }

  /** The link to the replica's process was lost: an open under way may try another replica, an open session ends. */
  private callerLinkLost(caller: CallerEnd): void {
    if (caller.state === 'opening') {
      caller.pending?.settle(
        new RetryOpen(ErrorCode.AgentGone, 'the link to the instance holding the replica was lost'),
      );
      return;
    }
    if (caller.state !== 'open') return;
    this.forgetCaller(caller);
    this.deps.metrics?.sessionError(ErrorCode.AgentGone.toLowerCase());
    caller.connection.send(
      errorFrame(
        caller.id,
        0,
        agentGone('the instance holding the agent replica of this session went away'),
        'session',
      ),
    );
  }
}

/** Whether the session ended meanwhile (read after an await: another turn may have ended it). */
const ended = (caller: CallerEnd): boolean => caller.state === 'ended';

function clamp(n: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, n));
}
