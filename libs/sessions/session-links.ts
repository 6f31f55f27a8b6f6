import type { WebSocket } from 'ws';
import { decodeSessionFrame, SessionFrame, SessionFrameError } from '@libs/frame';
import { createLogger } from '@libs/logging';
import { ClusterCredential, DialTarget, dialHolder, keepAlive, sendInTurn } from '@libs/streams';

/** Where another process reaches this one's sessions link. */
export const SESSIONS_LINK_PATH = '/internal/sessions/link';

const FIRST_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 5000;

/** Something a link carries frames for: told once when the link is lost (it ends what it held on it). */
export interface LinkSession {
  linkLost(): void;
}

export interface LinkHandlers {
  /** A frame on a link this process dialed: from the process holding an agent replica, or a session's home. */
  fromDialed(link: SessionLink, frame: SessionFrame, raw: Buffer): void;
  /** A frame on a link another process dialed to this one: from the process holding a caller or a subscriber. */
  fromDialer(link: SessionLink, frame: SessionFrame, raw: Buffer): void;
}

/**
 * One internal WebSocket between two gateway processes carrying session frames, in the same encoding as a client's.
 * The process whose client needs an agent replica (or a session home) of another dials it; every session between
 * the two in that direction shares the link. Both ends ping it; when it closes or goes silent, everything attached
 * to it is told (`linkLost`): the caller's end ends its sessions with AGENT_GONE, the agent's end cancels them.
 */
export class SessionLink {
  /** What is carried on this link, by session id (or session name, Mode 2): told when the link is lost. */
  readonly attached = new Map<string, LinkSession>();
  private lost = false;

  constructor(
    private readonly socket: WebSocket,
    /** The other process's holder id. */
    readonly peer: string,
    readonly dialed: boolean,
  ) {}

  get open(): boolean {
    return !this.lost && this.socket.readyState === this.socket.OPEN;
  }

  /** Bytes written to it and not yet sent. */
  get buffered(): number {
    return this.socket.bufferedAmount;
  }

  send(raw: Buffer): void {
    if (this.open) sendInTurn(this.socket, raw);
  }

  close(): void {
    this.socket.terminate();
  }

  /** Called once, when the socket closed: tells everything attached, then forgets it. */
  markLost(): void {
    if (this.lost) return;
    this.lost = true;
    const attached = [...this.attached.values()];
    this.attached.clear();
    for (const a of attached) a.linkLost();
  }
}

/**
 * The sessions links of this gateway process: those it dialed (one per other process, opened on first use and again
 * after a loss; a process whose handshake failed is left alone for a backoff, during which opens pick other
 * replicas) and those dialed to it. Frames go over the links only: sessions never touch Kafka or Temporal.
 */
export class SessionLinks {
  private readonly log = createLogger('SessionLinks');
  private readonly dialed = new Map<string, { link?: SessionLink; opening?: Promise<SessionLink>; address: string }>();
  private readonly down = new Map<string, { until: number; backoffMs: number }>();
  private readonly accepted = new Set<SessionLink>();
  private closing = false;

  constructor(
    private readonly credential: ClusterCredential,
    /** This process's holder id. */
    private readonly self: string,
    private readonly options: { heartbeatMs: number; maxPayload: number },
    private readonly handlers: LinkHandlers,
  ) {}

  /** False while `holder` is in backoff after a failed handshake. */
  available(holder: string): boolean {
    return (this.down.get(holder)?.until ?? 0) <= Date.now();
  }

  /** The link to `to`, dialed when there is none; rejects when it cannot be opened (and backs off that process). */
  to(to: DialTarget): Promise<SessionLink> {
    const known = this.dialed.get(to.holder);
    if (known?.link?.open && known.address === to.address) return Promise.resolve(known.link);
    if (known?.opening && known.address === to.address) return known.opening;
    if (this.closing) return Promise.reject(new Error('shutting down'));
    const entry: { link?: SessionLink; opening?: Promise<SessionLink>; address: string } = { address: to.address };
    entry.opening = dialHolder(to, SESSIONS_LINK_PATH, this.credential, this.self, this.options.maxPayload).then(
      (socket) => {
        entry.opening = undefined;
        this.down.delete(to.holder);
        const link = this.attach(socket, to.holder, true);
        entry.link = link;
        socket.once('close', () => {
          if (this.dialed.get(to.holder) === entry) this.dialed.delete(to.holder);
        });
        return link;
      },
      (e: Error) => {
        if (this.dialed.get(to.holder) === entry) this.dialed.delete(to.holder);
        const backoffMs = Math.min(MAX_BACKOFF_MS, (this.down.get(to.holder)?.backoffMs ?? FIRST_BACKOFF_MS / 2) * 2);
        this.down.set(to.holder, { until: Date.now() + backoffMs, backoffMs });
        this.log.warn(
          { holder: to.holder, address: to.address, error: e.message, retryInMs: backoffMs },
          'cannot open the sessions link',
        );
        throw e;
      },
    );
    this.dialed.set(to.holder, entry);
    return entry.opening;
  }

  /** A link another process dialed to this one (the route verified its cluster token). */
  accept(socket: WebSocket, peer: string): SessionLink {
    const link = this.attach(socket, peer, false);
    this.accepted.add(link);
    socket.once('close', () => this.accepted.delete(link));
    return link;
  }

  stats(): { dialed: number; accepted: number } {
    return { dialed: [...this.dialed.values()].filter((d) => d.link).length, accepted: this.accepted.size };
  }

  close(): void {
    this.closing = true;
    for (const { link } of this.dialed.values()) link?.close();
    for (const link of this.accepted) link.close();
    this.dialed.clear();
  }

  private attach(socket: WebSocket, peer: string, dialed: boolean): SessionLink {
    const link = new SessionLink(socket, peer, dialed);
    keepAlive(socket, this.options.heartbeatMs, () =>
      this.log.warn({ peer }, 'the sessions link went silent; closing it'),
    );
    socket.on('message', (raw: Buffer, binary: boolean) => {
      let frame: SessionFrame;
      try {
        if (!binary) throw new SessionFrameError('a text message');
        frame = decodeSessionFrame(raw);
      } catch (e) {
        this.log.warn({ peer, error: (e as Error).message }, 'unreadable frame on the sessions link; ignored');
        return;
      }
      if (dialed) this.handlers.fromDialed(link, frame, raw);
      else this.handlers.fromDialer(link, frame, raw);
    });
    socket.on('error', (e) => this.log.warn({ peer, error: e.message }, 'sessions link error'));
    socket.once('close', () => {
      if (link.attached.size > 0 && !this.closing)
        this.log.warn({ peer, sessions: link.attached.size }, 'sessions link lost; its sessions end');
      link.markLost();
    });
    return link;
  }
}
