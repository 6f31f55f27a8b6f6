import { EventEmitter } from 'node:events';
import { WebSocket } from 'ws';
import { keepAlive } from './cluster-dial';

/** A ws socket as keepAlive sees it: its events, ping, terminate, and the TCP socket's byte counts. */
class FakeSocket extends EventEmitter {
  readyState: number = WebSocket.OPEN;
  readonly _socket = { bytesRead: 0, bytesWritten: 0 };
  pings = 0;
  terminated = false;
  ping(): void {
    this.pings++;
    this._socket.bytesWritten += 6;
  }
  terminate(): void {
    this.terminated = true;
    this.emit('close');
  }
}

describe('keepAlive', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const start = (socket: FakeSocket, onSilent?: () => void) =>
    keepAlive(socket as unknown as WebSocket, 1000, onSilent);

  it('keeps a socket that answers its pings', () => {
    const socket = new FakeSocket();
    start(socket);
    for (let i = 0; i < 5; i++) {
      jest.advanceTimersByTime(1000);
      socket.emit('pong');
    }
    expect(socket.terminated).toBe(false);
    expect(socket.pings).toBe(5);
  });

  it('terminates a silent one after a whole period with no pong and nothing read, and says so', () => {
    const socket = new FakeSocket();
    const silent = jest.fn();
    start(socket, silent);
    jest.advanceTimersByTime(1000); // ping
    expect(socket.terminated).toBe(false);
    jest.advanceTimersByTime(1000); // no pong: silent
    expect(socket.terminated).toBe(true);
    expect(silent).toHaveBeenCalledTimes(1);
  });

  it('counts bytes read from the peer as a sign of life: its pong may wait behind a long write to it', () => {
    const socket = new FakeSocket();
    start(socket);
    for (let i = 0; i < 5; i++) {
      jest.advanceTimersByTime(1000);
      socket._socket.bytesRead += 40; // a credit frame, no pong yet
    }
    expect(socket.terminated).toBe(false);
  });

  it('does not count bytes written: a dead peer takes them too (its own pings among them)', () => {
    const socket = new FakeSocket();
    start(socket);
    jest.advanceTimersByTime(1000);
    socket._socket.bytesWritten += 100_000;
    jest.advanceTimersByTime(1000);
    expect(socket.terminated).toBe(true);
  });
});
