import type { SessionsConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { encodeSessionFrame, SessionFrame } from '@libs/frame';
import { createLogger } from '@libs/logging';
import { CoalescingRenewal } from '@libs/runtime';
import type { Caller, SessionAction } from '@libs/security';
import type { SessionHomeRow, SessionHomeStore } from '@libs/storage';
import type { SessionMetrics } from './call-sessions';
import { CreditWindow } from './credit-window';
import { errorAttributes, errorFrame } from './session-errors';
import { frameOf, HomeSession, Position, Relay } from './session-home';
import type { LinkSession, SessionLink, SessionLinks } from './session-links';
import { checkName, nameOfSessionId } from './session-names';
import type { SessionConnection } from './session-connection';
import type { SessionQuotas } from './session-quotas';

/** How often homes are renewed, and idle ones ended. */
const HOME_RENEW_MS = 1000;
/** A home not renewed within this is of a dead process: the next process that needs the session takes it over. */
const HOME_FRESH_MS = 5000;

export interface LiveSessionsDeps {
  config: SessionsConfig;
  store: SessionHomeStore;
  links: SessionLinks;
  quotas: SessionQuotas;
  admit(connection: SessionConnection, action: SessionAction, name: string): Promise<Caller>;
  metrics?: SessionMetrics;
}

/** A subscriber connected here: its window, what it holds unread, and its position. */
interface LocalSubscriber {
  connection: SessionConnection;
  /** Its reference at the home: its connection's id (one subscription per name per connection). */
  ref: string;
  principal: string;
  credit: CreditWindow;
  epoch: number;
  offset: number;
  live: boolean;
  since?: Position;
  release(): void;
}

/** A publisher connected here: the credit it has on the way to the home. */
interface LocalPublisher {
  id: string;
  connection: SessionConnection;
  credit: CreditWindow;
  opened: boolean;
  opening?: (answer: SessionFrame | EventMeshError) => void;
  release(): void;
}

/**
 * The members of one Mode 2 session this process holds (its subscribers and publishers), and its home: this process's
 * own HomeSession, or the link to the process that is its home. Attached to that link: when it is lost, the session
 * ends here for them (SESSION_ENDED, `home-lost`).
 */
class MemberSession implements LinkSession {
  readonly subscribers = new Map<SessionConnection, LocalSubscriber>();
  readonly publishers = new Map<string, LocalPublisher>();
  home?: { kind: 'local'; session: HomeSession; relay: Relay } | { kind: 'remote'; link: SessionLink };
  resolving?: Promise<void>;

  constructor(
    readonly tenant: string,
    readonly name: string,
    private readonly onLinkLost: (member: MemberSession) => void,
  ) {}

  get key(): string {
    return `${this.tenant}/${this.name}`;
  }

  get empty(): boolean {
    return this.subscribers.size === 0 && this.publishers.size === 0;
  }

  linkLost(): void {
    this.onLinkLost(this);
  }
}

/**
 * Mode 2, session pub/sub (docs/streaming-sessions.md#mode-2): a named session of a tenant, with no agent and nothing
 * to create first. Its home is the process that first needed it (claimed in `session_homes`, renewed every second,
 * taken over with a new epoch when its process is gone): it orders the publications, keeps the last ones and hands
 * each to every process with subscribers, over the sessions link. Each process fans out to its own subscribers, each
 * within its window: one that falls further behind is dropped (SLOW_SUBSCRIBER), never buffered without bound. A
 * subscriber that comes back with its position resumes from the history, or is told it was not recovered.
 */
export class LiveSessions {
  private readonly log = createLogger('LiveSessions');
  private readonly members = new Map<string, MemberSession>();
  private readonly homes = new Map<string, HomeSession>();
  /** Publishers connected here, by id (their member session). */
  private readonly publishers = new Map<string, MemberSession>();
  /** On a home: the relay of each link members came over, and the publishers' sessions by id. */
  private readonly linkRelays = new Map<SessionLink, Relay>();
  private readonly homeOfPublisher = new Map<string, HomeSession>();
  private me?: { holder: string; instanceId: string; address: string };
  /** This process's homes renewed every HOME_RENEW_MS, one write at a time (a slow database does not pile them up). */
  private readonly renewal = new CoalescingRenewal('session home rows', HOME_RENEW_MS, () => this.renew());

  constructor(private readonly deps: LiveSessionsDeps) {}

  start(me: { holder: string; instanceId: string; address: string }): void {
    this.me = me;
    this.renewal.start();
  }

  async close(): Promise<void> {
    await this.renewal.close();
    for (const home of [...this.homes.values()]) this.endHome(home, 'shutting-down');
    if (this.me) await this.deps.store.remove(this.me.holder).catch(() => undefined);
  }

  stats(): { homes: number; memberSessions: number; subscribers: number; publishers: number } {
    let subscribers = 0;
    for (const m of this.members.values()) subscribers += m.subscribers.size;
    return { homes: this.homes.size, memberSessions: this.members.size, subscribers, publishers: this.publishers.size };
  }

  isPublisher(connection: SessionConnection, id: string): boolean {
    return this.publishers.get(id)?.publishers.get(id)?.connection === connection;
  }

  // ---- a client's frames -----------------------------------------------------------------------------------

  async subscribe(connection: SessionConnection, frame: SessionFrame): Promise<void> {
    const name = frame.id;
    let release = () => undefined as void;
    try {
      checkName(name, 'session');
      const who = await this.deps.admit(connection, 'session.subscribe', name);
      if (this.members.get(`${who.tenant}/${name}`)?.subscribers.has(connection))
        throw new EventMeshError(ErrorCode.SessionExists, `this connection already subscribes to session ${name}`);
      const { subscriberWindowBytes, maxWindowBytes, maxChunkBytes } = this.deps.config;
      const window = Math.min(
        maxWindowBytes,
        Math.max(maxChunkBytes, frame.n > 0 ? Math.floor(frame.n) : subscriberWindowBytes),
      );
      // Admitted (the gate, then the quota) before anything is allocated for it.
      release = this.deps.quotas.openSession(who.tenant, window);
      const member = this.memberOf(who.tenant, name);
      const since =
        typeof frame.attributes.epoch === 'number' && typeof frame.attributes.offset === 'number'
          ? { epoch: frame.attributes.epoch, offset: frame.attributes.offset }
          : undefined;
      const sub: LocalSubscriber = {
        connection,
        ref: connection.id,
        principal: who.principal,
        credit: new CreditWindow(window, maxChunkBytes),
        epoch: 0,
        offset: 0,
        live: false,
        since,
        release,
      };
      member.subscribers.set(connection, sub);
      await this.resolve(member);
      if (!connection.open || member.subscribers.get(connection) !== sub) return;
      this.toHome(member, {
        kind: 'subscribe',
        id: member.key,
        attributes: {
          ref: sub.ref,
          principal: sub.principal,
          ...(since ? { epoch: since.epoch, offset: since.offset } : {}),
        },
      });
    } catch (e) {
      release();
      const member = this.findMember(connection, name);
      if (member?.subscribers.get(connection)) this.dropSubscriber(member, connection, false);
      connection.send(errorFrame(name, 0, e, 'open'));
    }
  }

  unsubscribe(connection: SessionConnection, frame: SessionFrame): void {
    const member = this.findMember(connection, frame.id);
    if (member) this.dropSubscriber(member, connection, true);
  }

  /** A subscriber gives back what it consumed of its window. */
  credit(connection: SessionConnection, frame: SessionFrame): void {
    this.findMember(connection, frame.id)?.subscribers.get(connection)?.credit.give(frame.n);
  }

  async openPublisher(connection: SessionConnection, frame: SessionFrame): Promise<void> {
    const id = frame.id;
    let release = () => undefined as void;
    try {
      const name = nameOfSessionId(id, 'session');
      if (this.publishers.has(id)) throw new EventMeshError(ErrorCode.SessionExists, `publisher ${id} is open`);
      const who = await this.deps.admit(connection, 'session.publish', name);
      const { windowBytes, maxWindowBytes, maxChunkBytes, openTimeoutMs } = this.deps.config;
      const window = Math.min(maxWindowBytes, Math.max(maxChunkBytes, frame.n > 0 ? Math.floor(frame.n) : windowBytes));
      release = this.deps.quotas.openSession(who.tenant, window);
      const member = this.memberOf(who.tenant, name);
      const publisher: LocalPublisher = {
        id,
        connection,
        credit: new CreditWindow(window, maxChunkBytes),
        opened: false,
        release,
      };
      member.publishers.set(id, publisher);
      this.publishers.set(id, member);
      await this.resolve(member);
      const answer = await new Promise<SessionFrame | EventMeshError>((resolve) => {
        const timer = setTimeout(
          () =>
            resolve(
              new EventMeshError(
                ErrorCode.SessionEnded,
                `the session's home did not answer within ${openTimeoutMs} ms`,
              ),
            ),
          openTimeoutMs,
        );
        publisher.opening = (a) => {
          clearTimeout(timer);
          publisher.opening = undefined;
          resolve(a);
        };
        this.toHome(member, { kind: 'publisher', id, attributes: { tenant: who.tenant } });
      });
      if (answer instanceof EventMeshError) throw answer;
      if (answer.kind === 'error') throw new EventMeshError(ErrorCode.SessionEnded, String(answer.attributes.message));
      if (!connection.open) return;
      publisher.opened = true;
      connection.send(encodeSessionFrame({ kind: 'opened', id, n: window, attributes: { maxChunk: maxChunkBytes } }));
    } catch (e) {
      const member = this.publishers.get(id);
      if (member?.publishers.get(id)?.connection === connection) this.dropPublisher(member, id, true);
      else release();
      connection.send(errorFrame(id, 0, e, 'open'));
    }
  }

  /** A publication: within the publisher's credit (the SDK waits for it), on to the home. */
  publish(connection: SessionConnection, frame: SessionFrame, raw: Buffer): void {
    const member = this.publishers.get(frame.id);
    const publisher = member?.publishers.get(frame.id);
    if (!member || publisher?.connection !== connection || !publisher.opened) {
      connection.send(
        errorFrame(
          frame.id,
          0,
          new EventMeshError(ErrorCode.SessionNotFound, `publisher ${frame.id} is not open`),
          'session',
        ),
      );
      return;
    }
    const bytes = frame.data.length;
    if (bytes > this.deps.config.maxChunkBytes || !publisher.credit.take(bytes)) {
      this.dropPublisher(member, frame.id, true);
      connection.send(
        errorFrame(
          frame.id,
          0,
          new EventMeshError(
            ErrorCode.FlowControlViolation,
            `a publication of ${bytes} bytes is past the publisher's credit or the largest chunk`,
          ),
          'session',
        ),
      );
      return;
    }
    this.deps.metrics?.sessionChunk(bytes);
    if (member.home?.kind === 'local') member.home.session.publish(frame.id, frame.data);
    else if (member.home?.kind === 'remote') member.home.link.send(raw);
  }

  closePublisher(connection: SessionConnection, frame: SessionFrame): void {
    const member = this.publishers.get(frame.id);
    if (member?.publishers.get(frame.id)?.connection === connection) this.dropPublisher(member, frame.id, true);
  }

  /** The connection closed: its subscriptions and publishers go. */
  connectionClosed(connection: SessionConnection): void {
    for (const member of [...this.members.values()]) {
      if (member.subscribers.has(connection)) this.dropSubscriber(member, connection, true);
      for (const [id, p] of [...member.publishers])
        if (p.connection === connection) this.dropPublisher(member, id, true);
    }
  }

  // ---- the home's side of a link -----------------------------------------------------------------------------

  /** A frame from a member process, on a link it dialed to this one (the home). */
  fromMemberLink(link: SessionLink, frame: SessionFrame, raw: Buffer): void {
    const relay = this.relayOf(link);
    switch (frame.kind) {
      case 'subscribe':
      case 'unsubscribe': {
        const home = this.homes.get(frame.id);
        if (!home) {
          const end = frameOf({ kind: 'end', id: frame.id, attributes: { reason: 'ended' } });
          return link.send(end.raw);
        }
        const ref = String(frame.attributes.ref);
        if (frame.kind === 'unsubscribe') return home.unsubscribe(relay, ref);
        const since = positionOf(frame.attributes);
        return home.subscribe(relay, ref, { client: ref, principal: String(frame.attributes.principal ?? '') }, since);
      }
      case 'publisher': {
        const home = this.homes.get(`${frame.attributes.tenant}/${nameOf(frame.id)}`);
        if (!home) {
          const refused = frameOf({
            kind: 'error',
            id: frame.id,
            attributes: errorAttributes(new EventMeshError(ErrorCode.SessionEnded, 'the session ended'), 'open'),
          });
          return link.send(refused.raw);
        }
        home.openPublisher(relay, frame.id);
        this.homeOfPublisher.set(frame.id, home);
        return link.send(encodeSessionFrame({ kind: 'opened', id: frame.id }));
      }
      case 'publish':
        this.homeOfPublisher.get(frame.id)?.publish(frame.id, frame.data);
        return;
      case 'close':
        this.homeOfPublisher.get(frame.id)?.closePublisher(frame.id);
        this.homeOfPublisher.delete(frame.id);
        return;
      default:
        void raw;
    }
  }

  /** A frame from a session's home, on a link this process dialed. */
  fromHomeLink(link: SessionLink, frame: SessionFrame): void {
    const member = frame.id.includes('/') ? this.members.get(frame.id) : this.publishers.get(frame.id);
    if (member?.home?.kind === 'remote' && member.home.link === link) this.fromHome(member, frame);
  }

  /** Whether a frame on a dialed link is Mode 2's (a session key, or a publisher of this process). */
  ownsHomeFrame(id: string): boolean {
    return id.includes('/') || this.publishers.has(id);
  }

  // ---- internals ---------------------------------------------------------------------------------------------

  private memberOf(tenant: string, name: string): MemberSession {
    const key = `${tenant}/${name}`;
    let member = this.members.get(key);
    if (!member) this.members.set(key, (member = new MemberSession(tenant, name, (m) => this.homeLost(m))));
    return member;
  }

  private findMember(connection: SessionConnection, name: string): MemberSession | undefined {
    return (
      this.members.get(`${connection.tenant}/${name}`) ??
      [...this.members.values()].find((m) => m.name === name && m.subscribers.has(connection))
    );
  }

  /** Finds (or becomes) the session's home, once per member session. */
  private resolve(member: MemberSession): Promise<void> {
    if (member.home) return Promise.resolve();
    member.resolving ??= (async () => {
      const me = this.me;
      if (!me) throw new EventMeshError(ErrorCode.ShuttingDown, 'sessions are not started');
      let row: SessionHomeRow;
      try {
        row = await this.deps.store.claim(member.tenant, member.name, me, HOME_FRESH_MS);
      } catch (e) {
        throw new EventMeshError(
          ErrorCode.DependencyUnavailable,
          `the session's home cannot be read: ${(e as Error).message}`,
          {},
          true,
        );
      }
      if (row.holder === me.holder) {
        let home = this.homes.get(member.key);
        if (!home || home.epoch !== row.epoch) {
          if (home) this.endHome(home, 'moved');
          home = new HomeSession(member.tenant, member.name, row.epoch, this.deps.config.historySize);
          this.homes.set(member.key, home);
          this.log.info({ session: member.key, epoch: row.epoch }, 'session home here');
        }
        member.home = { kind: 'local', session: home, relay: this.localRelay(member) };
        return;
      }
      let link: SessionLink;
      try {
        link = await this.deps.links.to({ holder: row.holder, address: row.address });
      } catch (e) {
        throw new EventMeshError(
          ErrorCode.SessionEnded,
          `the session's home cannot be reached: ${(e as Error).message}`,
        );
      }
      member.home = { kind: 'remote', link };
      link.attached.set(`live:${member.key}`, member);
    })().finally(() => (member.resolving = undefined));
    return member.resolving;
  }

  /** The relay of this process's own member session, for the home here: its frames handed straight over. */
  private localRelay(member: MemberSession): Relay {
    return { send: (_raw, frame) => this.fromHome(member, frame), buffered: 0 };
  }

  private relayOf(link: SessionLink): Relay {
    let relay = this.linkRelays.get(link);
    if (!relay) {
      relay = {
        send: (raw) => link.send(raw),
        get buffered() {
          return link.buffered;
        },
      };
      this.linkRelays.set(link, relay);
      const lost = relay;
      link.attached.set('live:home', {
        linkLost: () => {
          this.linkRelays.delete(link);
          for (const home of this.homes.values()) home.relayLost(lost);
          for (const [id, home] of [...this.homeOfPublisher])
            if (!home.hasPublisher(id)) this.homeOfPublisher.delete(id);
        },
      });
    }
    return relay;
  }

  /** A frame from the home (here or over the link) for this process's members of a session. */
  private fromHome(member: MemberSession, frame: SessionFrame): void {
    switch (frame.kind) {
      case 'subscribed': {
        const sub = [...member.subscribers.values()].find((s) => s.ref === frame.attributes.ref);
        if (!sub) return;
        const recovered = frame.attributes.recovered === true;
        sub.epoch = frame.call;
        sub.offset = recovered && sub.since ? sub.since.offset : frame.n;
        sub.live = true;
        sub.connection.send(
          encodeSessionFrame({
            kind: 'subscribed',
            id: member.name,
            call: frame.call,
            n: frame.n,
            attributes: {
              recovered: sub.since === undefined ? true : recovered,
              members: String(frame.attributes.members ?? '[]'),
              window: sub.credit.window,
            },
          }),
        );
        return;
      }
      case 'chunk':
        return this.deliver(member, frame);
      case 'presence': {
        const out = encodeSessionFrame({ kind: 'presence', id: member.name, attributes: frame.attributes });
        for (const sub of member.subscribers.values()) if (sub.live) sub.connection.send(out);
        return;
      }
      case 'end':
        return this.endMember(
          member,
          new EventMeshError(
            ErrorCode.SessionEnded,
            `session ${member.name} ended (${String(frame.attributes.reason ?? 'ended')})`,
            { reason: String(frame.attributes.reason ?? 'ended') },
          ),
        );
      case 'error':
        if (frame.id === member.key) {
          // The home dropped this process's subscribers of the session (they fell too far behind).
          const e = new EventMeshError(ErrorCode.SlowSubscriber, String(frame.attributes.message ?? 'dropped'));
          for (const connection of [...member.subscribers.keys()]) this.dropSubscriber(member, connection, false, e);
        } else member.publishers.get(frame.id)?.opening?.(frame);
        return;
      case 'opened':
        member.publishers.get(frame.id)?.opening?.(frame);
        return;
      case 'credit': {
        const publisher = member.publishers.get(frame.id);
        if (!publisher) return;
        const given = publisher.credit.give(frame.n);
        if (given > 0) publisher.connection.send(encodeSessionFrame({ kind: 'credit', id: publisher.id, n: given }));
        return;
      }
      default:
        return;
    }
  }

  /** A publication for the subscribers here: each gets it once, in order, within its window, or is dropped. */
  private deliver(member: MemberSession, frame: SessionFrame): void {
    const ref = frame.attributes.ref;
    let out: Buffer | undefined;
    for (const [connection, sub] of [...member.subscribers]) {
      if (!sub.live || (ref !== undefined && sub.ref !== ref)) continue;
      if (frame.call !== sub.epoch || frame.n <= sub.offset) continue;
      const bytes = frame.data.length;
      if (!sub.credit.take(bytes)) {
        this.deps.metrics?.sessionError(ErrorCode.SlowSubscriber.toLowerCase());
        this.dropSubscriber(
          member,
          connection,
          true,
          new EventMeshError(
            ErrorCode.SlowSubscriber,
            `subscriber of session ${member.name} fell behind by more than its window (${sub.credit.window} bytes); dropped at position ${sub.epoch}:${sub.offset}`,
            { epoch: sub.epoch, offset: sub.offset },
          ),
        );
        continue;
      }
      sub.offset = frame.n;
      out ??= encodeSessionFrame({
        kind: 'chunk',
        id: member.name,
        call: frame.call,
        n: frame.n,
        attributes: { publisher: String(frame.attributes.publisher) },
        data: frame.data,
      });
      connection.send(out);
    }
  }

  private dropSubscriber(
    member: MemberSession,
    connection: SessionConnection,
    tellHome: boolean,
    error?: EventMeshError,
  ): void {
    const sub = member.subscribers.get(connection);
    if (!sub) return;
    member.subscribers.delete(connection);
    sub.release();
    if (error) connection.send(errorFrame(member.name, 0, error, 'session'));
    if (tellHome && member.home)
      this.toHome(member, { kind: 'unsubscribe', id: member.key, attributes: { ref: sub.ref } });
    this.forgetIfEmpty(member);
  }

  private dropPublisher(member: MemberSession, id: string, tellHome: boolean): void {
    const publisher = member.publishers.get(id);
    if (!publisher) return;
    member.publishers.delete(id);
    this.publishers.delete(id);
    publisher.release();
    publisher.opening?.(new EventMeshError(ErrorCode.SessionNotFound, `publisher ${id} was closed`));
    if (tellHome && member.home) this.toHome(member, { kind: 'close', id });
    this.forgetIfEmpty(member);
  }

  private forgetIfEmpty(member: MemberSession): void {
    if (!member.empty || member.resolving) return;
    this.members.delete(member.key);
    if (member.home?.kind === 'remote' && member.home.link.attached.get(`live:${member.key}`) === member)
      member.home.link.attached.delete(`live:${member.key}`);
  }

  /** Hands a member's frame to its home: straight to the home here, or over the link. */
  private toHome(member: MemberSession, parts: Parameters<typeof frameOf>[0]): void {
    const home = member.home;
    if (!home) return;
    if (home.kind === 'remote') return home.link.send(encodeSessionFrame(parts));
    const session = home.session;
    const a = parts.attributes ?? {};
    switch (parts.kind) {
      case 'subscribe':
        return session.subscribe(
          home.relay,
          String(a.ref),
          { client: String(a.ref), principal: String(a.principal ?? '') },
          positionOf(a),
        );
      case 'unsubscribe':
        return session.unsubscribe(home.relay, String(a.ref));
      case 'publisher':
        session.openPublisher(home.relay, parts.id);
        return this.fromHome(member, frameOf({ kind: 'opened', id: parts.id }).frame);
      case 'close':
        return session.closePublisher(parts.id);
      default:
        return;
    }
  }

  /** Ends a session this process is the home of: every member, here and elsewhere, hears why. */
  private endHome(home: HomeSession, reason: string): void {
    if (this.homes.get(home.key) === home) this.homes.delete(home.key);
    for (const [id, h] of [...this.homeOfPublisher]) if (h === home) this.homeOfPublisher.delete(id);
    home.end(reason);
  }

  /** The link to a session's home was lost: the session ends here for its members. */
  private homeLost(member: MemberSession): void {
    this.endMember(
      member,
      new EventMeshError(ErrorCode.SessionEnded, `the home of session ${member.name} went away`, {
        reason: 'home-lost',
      }),
    );
  }

  private endMember(member: MemberSession, error: EventMeshError): void {
    this.deps.metrics?.sessionError(ErrorCode.SessionEnded.toLowerCase());
    for (const [connection, sub] of [...member.subscribers]) {
      member.subscribers.delete(connection);
      sub.release();
      connection.send(
        encodeSessionFrame({ kind: 'end', id: member.name, attributes: { ...errorAttributes(error, 'session') } }),
      );
    }
    for (const [id, publisher] of [...member.publishers]) {
      member.publishers.delete(id);
      this.publishers.delete(id);
      publisher.release();
      if (publisher.opening) publisher.opening(error);
      else publisher.connection.send(errorFrame(id, 0, error, 'session'));
    }
    this.forgetIfEmpty(member);
  }

  /** Renews this process's homes; ends the idle ones and those another process took over. */
  private async renew(): Promise<void> {
    const me = this.me;
    if (!me) return;
    const now = Date.now();
    for (const [key, home] of [...this.homes]) {
      if (!home.idle(now, this.deps.config.idleMs)) continue;
      this.log.info({ session: key, idleMs: this.deps.config.idleMs }, 'session ended: idle');
      this.endHome(home, 'idle');
      await this.deps.store.release(me.holder, home.tenant, home.name).catch(() => undefined);
    }
    const homes = [...this.homes.values()];
    if (homes.length === 0) return;
    const held = await this.deps.store.renew(me.holder, homes);
    for (const home of homes) if (!held.has(home.key) && this.homes.get(home.key) === home) this.endHome(home, 'moved');
  }
}

function positionOf(a: Record<string, unknown>): Position | undefined {
  return typeof a.epoch === 'number' && typeof a.offset === 'number' ? { epoch: a.epoch, offset: a.offset } : undefined;
}

/** The session name a publisher id names (`<name>:<uuid>`). */
const nameOf = (id: string) => id.slice(0, id.indexOf(':'));
