import type { EventMeshError } from '@libs/errors';
import type { SessionFrame } from '@libs/frame';
import type { Replica } from './agent-replicas';
import { CreditWindow } from './credit-window';
import type { SessionConnection } from './session-connection';
import type { LinkSession, SessionLink } from './session-links';

/** A session as an operator sees it, on the agent's side (where its bytes are counted). */
export interface SessionView {
  session: string;
  since: string;
  window: number;
  /** Bytes of its chunks on the way now (at most the window). */
  inFlight: number;
  bytes: number;
  chunks: number;
  stalls: number;
  /** The call under way (0: none). */
  call: number;
}

/**
 * A session on the side of its agent replica: the credit the runtime enforces (credit-window.ts), the call under way,
 * and how to reach the caller: its connection when it is on this process, else the link it came over.
 */
export class AgentEnd implements LinkSession {
  readonly since = new Date();
  readonly credit: CreditWindow;
  activeCall = 0;
  lastCall = 0;
  bytes = 0;
  chunks = 0;
  ended = false;

  constructor(
    readonly id: string,
    readonly replica: Replica,
    readonly window: number,
    readonly maxChunk: number,
    /** Hands a frame to the caller's side. */
    readonly toCaller: (raw: Buffer) => void,
    /** Ends the caller's side with an error (the session is over). */
    readonly failCaller: (e: EventMeshError) => void,
    /** The link it came over (the caller is on another process). */
    readonly link: SessionLink | undefined,
    private readonly onLinkLost: (end: AgentEnd) => void,
  ) {
    this.credit = new CreditWindow(window, maxChunk);
  }

  linkLost(): void {
    this.onLinkLost(this);
  }

  view(): SessionView {
    return {
      session: this.id,
      since: this.since.toISOString(),
      window: this.window,
      inFlight: this.credit.held,
      bytes: this.bytes,
      chunks: this.chunks,
      stalls: this.credit.stalls,
      call: this.activeCall,
    };
  }
}

export type Target =
  { kind: 'local'; end: AgentEnd } | { kind: 'remote'; link: SessionLink; replicaId: string; holder: string };

/** A session on the side of its caller's connection, on the process that connection is held by. */
export class CallerEnd implements LinkSession {
  state: 'opening' | 'open' | 'ended' = 'opening';
  tenant = '';
  principal = '';
  target?: Target;
  release: () => void = () => undefined;
  /** A remote open waiting for the agent's process: settled by its answer, the link's loss, or the timeout. */
  pending?: { settle(answer: SessionFrame | EventMeshError): void };

  constructor(
    readonly id: string,
    readonly agent: string,
    readonly connection: SessionConnection,
    public window: number,
    private readonly onLinkLost: (caller: CallerEnd) => void,
  ) {}

  linkLost(): void {
    this.onLinkLost(this);
  }
}
