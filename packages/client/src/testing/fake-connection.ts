import type { Transport } from '../consumer-types';
import type { Answer, Connect, ConnectParams, Connection } from '../transports/connection';

/** A stream connection a unit test drives: it delivers what the test says and records the consumer's answers. */
export class FakeConnection implements Connection {
  readonly answers: Answer[] = [];
  readonly ended: Promise<Error | undefined>;
  open = true;
  private end!: (e: Error | undefined) => void;

  constructor(
    readonly transport: Transport,
    private readonly params: ConnectParams,
  ) {
    this.ended = new Promise((r) => (this.end = r));
  }

  deliver(deliveryId: string, event: Record<string, unknown>): void {
    this.params.onDelivery({ deliveryId, event: { specversion: '1.0', type: 't', source: '/s', ...event } as never });
  }

  async answer(a: Answer): Promise<boolean> {
    if (!this.open) return false;
    this.answers.push(a);
    return true;
  }

  /** The connection drops (the runtime went away). */
  drop(): void {
    this.open = false;
    this.end(new Error('dropped'));
  }

  close(): void {
    this.open = false;
    this.end(undefined);
  }
}

/** Connects of every transport, each making a FakeConnection (or throwing what `refuse` gives for that transport). */
export function fakeConnects(refuse: (t: Transport) => Error | undefined = () => undefined) {
  const connections: FakeConnection[] = [];
  const of =
    (t: Transport): Connect =>
    async (p) => {
      const refusal = refuse(t);
      if (refusal) throw refusal;
      const c = new FakeConnection(t, p);
      connections.push(c);
      return c;
    };
  return {
    connections,
    connect: { websocket: of('websocket'), sse: of('sse'), 'long-poll': of('long-poll') } as Record<Transport, Connect>,
  };
}
