import WebSocket from 'ws';

/**
 * The status a WebSocket handshake at `url` is answered with: 101 when it opens (the socket is closed at once), else
 * the HTTP status the server refused it with. A connection error rejects.
 */
export function handshakeStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    ws.once('error', reject);
  });
}
