import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { dropWhenSilent } from './silent-links';

/** The part of a socket the watch reads: its byte counters, destroy and close. */
class FakeSocket extends EventEmitter {
  bytesRead = 0;
  bytesWritten = 0;
  destroyedWith?: Error;
  destroy(error?: Error): this {
    this.destroyedWith = error;
    this.emit('close');
    return this;
  }
}

describe('dropWhenSilent', () => {
  const SILENCE_MS = 1000;
  let socket: FakeSocket;
  let drops: number;

  beforeEach(() => {
    jest.useFakeTimers();
    socket = new FakeSocket();
    drops = 0;
    dropWhenSilent(socket as unknown as Socket, SILENCE_MS, () => drops++);
  });
  afterEach(() => jest.useRealTimers());

  it('destroys a connection that answered nothing for the silence after a request was written', () => {
    socket.bytesWritten = 100;
    jest.advanceTimersByTime(SILENCE_MS);
    expect(socket.destroyedWith).toBeUndefined();
    jest.advanceTimersByTime(SILENCE_MS / 4);
    expect(socket.destroyedWith?.message).toMatch(/no answer within 1000 ms/);
    expect(drops).toBe(1);
  });

  it('keeps a connection that answers, however long it lives, and one with nothing written (idle)', () => {
    for (let i = 1; i <= 20; i++) {
      socket.bytesWritten += 50;
      jest.advanceTimersByTime(SILENCE_MS / 2);
      socket.bytesRead += 80;
      jest.advanceTimersByTime(SILENCE_MS / 2);
    }
    // Idle: the last request was answered, nothing written since.
    jest.advanceTimersByTime(10 * SILENCE_MS);
    expect(socket.destroyedWith).toBeUndefined();
    expect(drops).toBe(0);
  });

  it("counts the silence from the first request after the last answer, not from the connection's start", () => {
    socket.bytesWritten = 10;
    jest.advanceTimersByTime(SILENCE_MS / 2);
    socket.bytesRead = 10;
    jest.advanceTimersByTime(SILENCE_MS * 3);
    socket.bytesWritten = 20;
    jest.advanceTimersByTime(SILENCE_MS / 2);
    expect(socket.destroyedWith).toBeUndefined();
    jest.advanceTimersByTime(SILENCE_MS);
    expect(drops).toBe(1);
  });

  it('stops watching a connection once it closed', () => {
    socket.emit('close');
    socket.bytesWritten = 10;
    jest.advanceTimersByTime(10 * SILENCE_MS);
    expect(drops).toBe(0);
  });
});
