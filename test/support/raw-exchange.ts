import { connect, type Socket } from 'node:net';

/** Sends `request` whole on a raw socket; resolves with the answer's first line, or undefined if none came. */
export function rawExchange(
  port: number,
  request: string,
): Promise<{ status?: string; socket: Socket; closed: Promise<number> }> {
  const socket = connect(port, '127.0.0.1');
  let answered = 0;
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - answered)));
  socket.on('error', () => undefined);
  return new Promise((resolve) => {
    socket.on('connect', () => socket.write(request));
    socket.once('data', (chunk) => {
      answered = Date.now();
      resolve({ status: chunk.toString('latin1').split('\r\n')[0], socket, closed });
    });
    socket.once('close', () => resolve({ status: undefined, socket, closed }));
  });
}
