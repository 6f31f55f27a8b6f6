import { WebSocketServer, WebSocket } from 'ws';

/**
 * The baseline of `npm run bench:sessions`: the least a broker in the middle costs. A process holding WebSockets and
 * forwarding each binary message as it is, with no framing of its own, no flow control, no security and nothing
 * kept: `/agent` and `/caller` (one of each: what one sends, the other gets), `/pub` and `/sub` (what a publisher
 * sends, every subscriber gets). It prints `listening <port>` once it listens.
 */
const server = new WebSocketServer({ port: 0, host: '127.0.0.1', maxPayload: 64 * 1024 * 1024 });
let agent: WebSocket | undefined;
let caller: WebSocket | undefined;
const subscribers = new Set<WebSocket>();

server.on('connection', (socket, request) => {
  const path = request.url ?? '';
  if (path.startsWith('/agent')) agent = socket;
  else if (path.startsWith('/caller')) caller = socket;
  else if (path.startsWith('/sub')) subscribers.add(socket);
  socket.on('message', (data: Buffer) => {
    if (path.startsWith('/agent')) caller?.send(data);
    else if (path.startsWith('/caller')) agent?.send(data);
    else if (path.startsWith('/pub')) for (const s of subscribers) s.send(data);
  });
  socket.on('close', () => subscribers.delete(socket));
  socket.on('error', () => undefined);
});
server.on('listening', () => process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`));
