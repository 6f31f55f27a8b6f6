import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AccessLog, AccessRecord } from '@libs/logging';
import { waitFor } from '../../../../test/support/wait-for';
import { RequestLog, requestIdOfRequest } from './request-log';

/** RequestLog on a real HTTP server (loopback): the id on the request and the answer, and the access record. */
describe('RequestLog', () => {
  const records: AccessRecord[] = [];
  const seen: (string | undefined)[] = [];
  const access: AccessLog = { wants: (status) => status !== 204, write: (r) => records.push(r) };
  const requests = new RequestLog(access);
  let server: Server;
  let url: string;

  beforeAll(async () => {
    server = createServer((request, response) => {
      requests.begin(request, response);
      seen.push(requestIdOfRequest(request));
      response.statusCode = request.url?.startsWith('/empty') ? 204 : 201;
      response.end(request.url?.startsWith('/empty') ? undefined : 'ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** Waits for the access record of a request (written when its response closes). */
  const recordOf = (id: string): Promise<AccessRecord> =>
    waitFor(`the access record of ${id}`, () => records.find((r) => r.requestId === id), {
      timeoutMs: 5000,
      intervalMs: 5,
    });

  it("answers with the caller's usable id, names the request by it, and records the path without the query", async () => {
    const answer = await fetch(`${url}/things/1?token=secret`, {
      method: 'PUT',
      headers: { 'x-request-id': 'abc.DEF:1-2_3' },
    });
    expect(answer.headers.get('x-request-id')).toBe('abc.DEF:1-2_3');
    expect(seen.at(-1)).toBe('abc.DEF:1-2_3');
    const record = await recordOf('abc.DEF:1-2_3');
    expect(record).toEqual({
      requestId: 'abc.DEF:1-2_3',
      method: 'PUT',
      path: '/things/1',
      status: 201,
      durationMs: expect.any(Number),
      aborted: false,
    });
    expect(JSON.stringify(record)).not.toContain('secret');
  });

  it('makes a fresh id for a request without a usable one', async () => {
    const answer = await fetch(`${url}/x`, { headers: { 'x-request-id': 'a b' } });
    const id = answer.headers.get('x-request-id')!;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect((await recordOf(id)).path).toBe('/x');
  });

  it('writes no record for a status the access log does not want', async () => {
    const answer = await fetch(`${url}/empty`, { headers: { 'x-request-id': 'empty-1' } });
    expect(answer.status).toBe(204);
    await fetch(`${url}/after`, { headers: { 'x-request-id': 'after-1' } });
    await recordOf('after-1');
    expect(records.map((r) => r.requestId)).not.toContain('empty-1');
  });
});
