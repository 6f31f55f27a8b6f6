import { decodeSessionFrame, encodeSessionFrame, SessionAttributes, SessionFrame, SessionFrameKind } from '@libs/frame';

/**
 * Where a home sends what concerns the members one process holds of its session: over the link to that process, or
 * straight to this process's own member session. Frames are in the link's form (`id` the session's key,
 * `<tenant>/<name>`, or a publisher's id), encoded once for every relay.
 */
export interface Relay {
  send(raw: Buffer, frame: SessionFrame): void;
  /** Bytes written to it and not yet sent (a link's socket); the home drops a relay that falls this far behind. */
  readonly buffered: number;
}

/** A subscriber as presence lists it. */
export interface Member {
  client: string;
  principal: string;
}

/** A position in a session: the home's epoch (a new home starts a new one) and the publication's offset in it. */
export interface Position {
  epoch: number;
  offset: number;
}

interface Publication {
  offset: number;
  publisher: string;
  data: Buffer;
}

/** How far behind (bytes buffered toward it) a relay may fall before the home drops it as a slow subscriber. */
export const RELAY_MAX_BUFFERED_BYTES = 64 * 1024 * 1024;

export function frameOf(parts: {
  kind: SessionFrameKind;
  id: string;
  call?: number;
  n?: number;
  attributes?: SessionAttributes;
  data?: Buffer;
}): { raw: Buffer; frame: SessionFrame } {
  const raw = encodeSessionFrame(parts);
  return { raw, frame: decodeSessionFrame(raw) };
}

/**
 * A Mode 2 session on its home process (docs/streaming-sessions.md#mode-2): it numbers the publications (offsets in
 * its epoch, in the order they reach it, so each publisher's are in its order), keeps the last `historySize` of them
 * in memory, and hands each to every relay once (each process with subscribers fans it out to its own). Presence is
 * its list of subscribers, with join and leave events to all. Nothing is written anywhere: a session is as long-lived
 * as its home process.
 */
export class HomeSession {
  offset = 0;
  lastActivity = Date.now();
  private readonly history: Publication[] = [];
  /** Subscribers by `<relay id>/<ref>`. */
  private readonly members = new Map<string, Member & { relay: Relay; ref: string }>();
  /** Relays with subscribers, and how many each has. */
  private readonly relays = new Map<Relay, number>();
  /** Publishers, by id, and the relay their process is reached at. */
  private readonly publishers = new Map<string, Relay>();
  private readonly relayIds = new WeakMap<Relay, string>();
  private nextRelayId = 0;

  constructor(
    readonly tenant: string,
    readonly name: string,
    readonly epoch: number,
    private readonly historySize: number,
  ) {}

  get key(): string {
    return `${this.tenant}/${this.name}`;
  }

  stats(): { subscribers: number; publishers: number; offset: number; epoch: number } {
    return { subscribers: this.members.size, publishers: this.publishers.size, offset: this.offset, epoch: this.epoch };
  }

  /**
   * A subscriber joins through `relay`: it is told where the session is and whether it was recovered (`since` is in
   * the history: what it missed is replayed to it alone, then the live publications follow), then everyone hears of
   * the join.
   */
  subscribe(relay: Relay, ref: string, member: Member, since?: Position): void {
    this.lastActivity = Date.now();
    const key = `${this.relayId(relay)}/${ref}`;
    if (!this.members.has(key)) this.relays.set(relay, (this.relays.get(relay) ?? 0) + 1);
    this.members.set(key, { ...member, relay, ref });
    const first = this.history[0]?.offset ?? this.offset + 1;
    const recovered =
      since !== undefined && since.epoch === this.epoch && since.offset <= this.offset && since.offset >= first - 1;
    const { raw, frame } = frameOf({
      kind: 'subscribed',
      id: this.key,
      call: this.epoch,
      n: this.offset,
      attributes: {
        ref,
        recovered: since === undefined ? true : recovered,
        members: JSON.stringify(
          [...this.members.values()].slice(0, 1000).map(({ client, principal }) => ({ client, principal })),
        ),
      },
    });
    relay.send(raw, frame);
    if (recovered)
      for (const p of this.history)
        if (p.offset > since!.offset) {
          const replay = this.publicationFrame(p, ref);
          relay.send(replay.raw, replay.frame);
        }
    this.presence('join', member);
  }

  /** A subscriber leaves: everyone hears of it. */
  unsubscribe(relay: Relay, ref: string): void {
    const key = `${this.relayId(relay)}/${ref}`;
    const member = this.members.get(key);
    if (!member) return;
    this.members.delete(key);
    this.lostMember(relay);
    this.presence('leave', member);
  }

  openPublisher(relay: Relay, id: string): void {
    this.lastActivity = Date.now();
    this.publishers.set(id, relay);
  }

  closePublisher(id: string): void {
    this.publishers.delete(id);
  }

  hasPublisher(id: string): boolean {
    return this.publishers.has(id);
  }

  /**
   * A publication of publisher `id`: numbered, kept, handed to every relay once; then the publisher's credit for it is
   * given back. A relay that fell {@link RELAY_MAX_BUFFERED_BYTES} behind is dropped (its subscribers are slow).
   */
  publish(id: string, data: Buffer): void {
    const relayOfPublisher = this.publishers.get(id);
    if (!relayOfPublisher) return;
    this.lastActivity = Date.now();
    const p: Publication = { offset: ++this.offset, publisher: id, data };
    if (this.historySize > 0) {
      this.history.push(p);
      if (this.history.length > this.historySize) this.history.shift();
    }
    const { raw, frame } = this.publicationFrame(p);
    for (const relay of [...this.relays.keys()]) {
      if (relay.buffered > RELAY_MAX_BUFFERED_BYTES) {
        this.dropRelay(relay);
        continue;
      }
      relay.send(raw, frame);
    }
    const credit = frameOf({ kind: 'credit', id, n: data.length });
    relayOfPublisher.send(credit.raw, credit.frame);
  }

  /** A relay's process went away: its subscribers leave, its publishers are gone. */
  relayLost(relay: Relay): void {
    for (const [key, member] of [...this.members])
      if (member.relay === relay) {
        this.members.delete(key);
        this.presence('leave', member);
      }
    this.relays.delete(relay);
    for (const [id, r] of [...this.publishers]) if (r === relay) this.publishers.delete(id);
  }

  /** Ends the session: every relay and every publisher's process hears why. */
  end(reason: string): void {
    const { raw, frame } = frameOf({ kind: 'end', id: this.key, attributes: { reason } });
    const told = new Set<Relay>();
    for (const relay of [...this.relays.keys(), ...this.publishers.values()]) {
      if (told.has(relay)) continue;
      told.add(relay);
      relay.send(raw, frame);
    }
    this.members.clear();
    this.relays.clear();
    this.publishers.clear();
  }

  /** Idle: nothing published, nobody joined and nobody opened a publisher for `idleMs`. */
  idle(now: number, idleMs: number): boolean {
    return now - this.lastActivity >= idleMs;
  }

  private dropRelay(relay: Relay): void {
    const { raw, frame } = frameOf({
      kind: 'error',
      id: this.key,
      attributes: {
        code: 'SLOW_SUBSCRIBER',
        status: 409,
        scope: 'session',
        message: 'the subscribers of this session on an instance fell too far behind and were dropped',
      },
    });
    relay.send(raw, frame);
    for (const [key, member] of [...this.members])
      if (member.relay === relay) {
        this.members.delete(key);
        this.presence('leave', member);
      }
    this.relays.delete(relay);
  }

  private lostMember(relay: Relay): void {
    const left = (this.relays.get(relay) ?? 1) - 1;
    if (left > 0) this.relays.set(relay, left);
    else this.relays.delete(relay);
  }

  private presence(event: 'join' | 'leave', member: Member): void {
    const { raw, frame } = frameOf({
      kind: 'presence',
      id: this.key,
      attributes: { event, client: member.client, principal: member.principal },
    });
    for (const relay of this.relays.keys()) relay.send(raw, frame);
  }

  private publicationFrame(p: Publication, ref?: string): { raw: Buffer; frame: SessionFrame } {
    return frameOf({
      kind: 'chunk',
      id: this.key,
      call: this.epoch,
      n: p.offset,
      attributes: ref === undefined ? { publisher: p.publisher } : { publisher: p.publisher, ref },
      data: p.data,
    });
  }

  private relayId(relay: Relay): string {
    let id = this.relayIds.get(relay);
    if (id === undefined) this.relayIds.set(relay, (id = String(++this.nextRelayId)));
    return id;
  }
}
