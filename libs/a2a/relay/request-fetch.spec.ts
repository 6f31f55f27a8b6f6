import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';
import { AgentAnswerTooLarge, requestFetch } from './request-fetch';

/** The fetch the mesh's A2A clients use, against a loopback server. */
describe('requestFetch', () => {
  let server: Server;
  let base: string;
  let handle: (req: IncomingMessage, body: string, res: ServerResponse) => void;
  const dispatcher = new Agent();
  const LIMIT = 64 * 1024;
  const fetchImpl = requestFetch(dispatcher, LIMIT);

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => handle(req, Buffer.concat(chunks).toString('utf8'), res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await dispatcher.close();
  });

  it('sends the method, headers and body, and answers the status, headers and body', async () => {
    let seen: { method?: string; auth?: string; body?: string } = {};
    handle = (req, body, res) => {
      seen = { method: req.method, auth: req.headers.authorization, body };
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      res.writeHead(201, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":{}}');
    };
    const answer = await fetchImpl(`${base}/rpc`, {
      method: 'POST',
      headers: { authorization: 'Bearer t', 'content-type': 'application/json' },
      body: '{"x":1}',
    });
    expect(seen).toEqual({ method: 'POST', auth: 'Bearer t', body: '{"x":1}' });
    expect([answer.status, answer.ok, answer.headers.get('content-type'), answer.headers.get('set-cookie')]).toEqual([
      201,
      true,
      'application/json',
      'a=1, b=2',
    ]);
    expect(await answer.json()).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
    // A GET, and a URL object.
    handle = (req, _body, res) => res.writeHead(404, { 'content-type': 'text/plain' }).end(`no ${req.url}`);
    const missing = await fetchImpl(new URL(`${base}/tasks/1`));
    expect([missing.status, missing.ok, await missing.text()]).toEqual([404, false, 'no /tasks/1']);
  });

  it('hands an event stream over as it arrives, before the server ends it', async () => {
    let end!: () => void;
    handle = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\n');
      end = () => res.end('data: {"n":2}\n\n');
    };
    const answer = await fetchImpl(`${base}/stream`, { method: 'POST', body: '{}' });
    const reader = answer.body!.getReader();
    const first = await reader.read();
    expect(Buffer.from(first.value!).toString('utf8')).toBe('data: {"n":1}\n\n');
    end();
    let rest = '';
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
      rest += Buffer.from(chunk.value).toString('utf8');
    expect(rest).toBe('data: {"n":2}\n\n');
  });

  it('answers a 204 with no body', async () => {
    handle = (_req, _body, res) => res.writeHead(204).end();
    const answer = await fetchImpl(`${base}/none`, { method: 'DELETE' });
    expect([answer.status, answer.body]).toEqual([204, null]);
  });

  it('rejects when its signal aborts, also while it waits for the answer', async () => {
    handle = () => undefined; // never answers
    const aborted = new AbortController();
    aborted.abort();
    await expect(fetchImpl(`${base}/x`, { signal: aborted.signal })).rejects.toThrow();
    const later = new AbortController();
    const pending = fetchImpl(`${base}/x`, { signal: later.signal });
    setTimeout(() => later.abort(), 20);
    await expect(pending).rejects.toThrow();
  });

  it('reads a JSON answer up to the cap, and aborts the read of a larger one with AgentAnswerTooLarge', async () => {
    let closed!: Promise<void>;
    handle = (_req, _body, res) => {
      closed = new Promise((resolve) => res.once('close', () => resolve()));
      res.writeHead(200, { 'content-type': 'application/json' });
      // Written in pieces and never ended when too large: only the cap can end the read.
      res.write('"');
      res.write('x'.repeat(LIMIT - 2));
      if (size === LIMIT) res.end('"');
      else res.write('x'.repeat(LIMIT));
    };
    let size = LIMIT;
    const fits = await fetchImpl(`${base}/fits`, { method: 'POST', body: '{}' });
    expect((await fits.text()).length).toBe(LIMIT);
    size = LIMIT + 1;
    await expect(fetchImpl(`${base}/large`, { method: 'POST', body: '{}' })).rejects.toBeInstanceOf(
      AgentAnswerTooLarge,
    );
    // The agent's connection is closed: nothing more of it is read.
    await closed;
  });

  it('caps each event of an event stream, not the stream', async () => {
    let writeLarge!: () => void;
    handle = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // Many events that fit, CRLF and LF: more than the cap in all.
      for (let i = 0; i < 4; i++) res.write(`data: ${'y'.repeat(LIMIT / 2)}\r\n\r\n`);
      writeLarge = () => res.write(`data: ${'z'.repeat(LIMIT)}\n`);
    };
    const answer = await fetchImpl(`${base}/stream`, { method: 'POST', body: '{}' });
    const reader = answer.body!.getReader();
    let read = 0;
    while (read < 4 * (LIMIT / 2 + 10)) read += (await reader.read()).value!.length;
    writeLarge();
    await expect(
      (async () => {
        for (;;) if ((await reader.read()).done) return;
      })(),
    ).rejects.toBeInstanceOf(AgentAnswerTooLarge);
  });

  it('rejects when nothing listens', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await expect(fetchImpl(`http://127.0.0.1:${port}/`)).rejects.toThrow();
  });
});
