import { createServer, Server, Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { waitFor } from '../../test/support/wait-for';
import { writeInTurn } from './turn-writes';

/** Writes to one client in one turn of the event loop leave together, on a real loopback TCP connection. */
describe('writeInTurn', () => {
  let server: Server;
  let client: Socket;
  let peer: Socket;
  let received = '';

  beforeAll(async () => {
    server = createServer((s) => {
      peer = s;
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = new Socket();
    client.on('data', (d: Buffer) => (received += d.toString()));
    await new Promise<void>((resolve) => client.connect((server.address() as AddressInfo).port, '127.0.0.1', resolve));
    await waitFor('the server side of the connection', () => peer !== undefined, { timeoutMs: 5000, intervalMs: 5 });
  });
  afterAll(async () => {
    client.destroy();
    peer.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends the messages of one turn in one write, in their order, and those of the next turn in another', async () => {
    const writes = jest.spyOn(peer as unknown as { _write: (...a: unknown[]) => void }, '_write');
    const writevs = jest.spyOn(peer as unknown as { _writev: (...a: unknown[]) => void }, '_writev');
    const messages = Array.from({ length: 50 }, (_, i) => `m${i};`);
    for (const m of messages) writeInTurn(peer, () => peer.write(m));
    // Nothing has left during the turn.
    expect(writes).not.toHaveBeenCalled();
    expect(writevs).not.toHaveBeenCalled();
    await waitFor("the first turn's messages", () => received === messages.join(''), {
      timeoutMs: 5000,
      intervalMs: 5,
    });
    expect(writevs).toHaveBeenCalledTimes(1);
    expect(writes).not.toHaveBeenCalled();
    writeInTurn(peer, () => peer.write('next;'));
    writeInTurn(peer, () => peer.write('last;'));
    await waitFor("the second turn's messages", () => received.endsWith('next;last;'), {
      timeoutMs: 5000,
      intervalMs: 5,
    });
    expect(writevs).toHaveBeenCalledTimes(2);
  });
});
