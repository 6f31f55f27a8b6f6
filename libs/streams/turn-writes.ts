/** Something whose writes can be held and flushed together: a TCP socket, an HTTP response. */
export interface Corkable {
  cork(): void;
  uncork(): void;
  readonly destroyed?: boolean;
}

/** The streams corked for the current turn of the event loop. */
const corked = new WeakSet<Corkable>();

/**
 * Holds `stream`'s writes until the current turn of the event loop is over, so what is written to one client in one
 * turn (a stream lane starts up to its buffer of deliveries at once; one read of a client's answers holds many) leaves in one write
 * rather than a system call each. Corked at the first write of the turn, uncorked once the turn's callbacks and
 * promise jobs have run (`setImmediate`).
 */
export function writeInTurn(stream: Corkable, write: () => void): void {
  if (!corked.has(stream) && !stream.destroyed) {
    corked.add(stream);
    stream.cork();
    setImmediate(() => {
      corked.delete(stream);
      stream.uncork();
    });
  }
  write();
}

/** A ws WebSocket, as far as sendInTurn needs it: its send, and ws's own field for its TCP socket (ws 8). */
interface TurnSocket {
  send(data: string | Buffer, cb?: (error?: Error) => void): void;
}

/**
 * Sends a WebSocket message (a Buffer as a binary one); the messages sent on one socket in one turn leave in one write ({@link writeInTurn}).
 * Without ws's `_socket` (not connected yet, or another ws release) the message is written at once.
 */
export function sendInTurn(socket: TurnSocket, data: string | Buffer, cb?: (error?: Error) => void): void {
  inTurnOf(socket, () => socket.send(data, cb));
}

/** A ws WebSocket that sends a Buffer as a text message when told (`binary: false`). */
interface TextSocket {
  send(data: Buffer, options: { binary: boolean }): void;
}

/** {@link sendInTurn} for UTF-8 JSON already in bytes: sent as a text message, in the turn's write. */
export function sendTextInTurn(socket: TextSocket, data: Buffer): void {
  inTurnOf(socket, () => socket.send(data, { binary: false }));
}

/** Runs `send` in the turn's write of the socket's TCP stream, or at once without ws's `_socket`. */
function inTurnOf(socket: object, send: () => void): void {
  const tcp = (socket as { _socket?: Corkable | null })._socket;
  if (tcp) writeInTurn(tcp, send);
  else send();
}
