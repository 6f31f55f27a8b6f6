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
 * turn (a lane starts up to 32 deliveries at once; one read of a client's answers holds many) leaves in one write
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
