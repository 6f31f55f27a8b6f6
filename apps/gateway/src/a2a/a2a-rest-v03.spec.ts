import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import Fastify from 'fastify';
import type { MeshTaskHandler, TaskStreams } from '@libs/a2a';
import type { Caller } from '@libs/security';
import { serveLegacyRest, withoutInternalDetail } from './a2a-rest-v03';

/** What the SDK's v0.3 router gets of the mesh's handler: the runtime's failures without their detail. */
describe('withoutInternalDetail', () => {
  const outage = new Error('connect ECONNREFUSED 127.0.0.1:5432');
  async function* failing(): AsyncGenerator<number> {
    yield 1;
    throw outage;
  }
  const fake = {
    getTask: () => Promise.reject(outage),
    cancelTask: () => Promise.reject(new TaskNotFoundError('task t not found')),
    resubscribe: () => failing(),
    getAgentCard: () => Promise.resolve({ name: 'echo' }),
  } as unknown as MeshTaskHandler;
  const handler = withoutInternalDetail(fake) as unknown as Record<string, (...a: unknown[]) => unknown>;

  it('answers a failure of the runtime as an internal error, without its message', async () => {
    await expect(handler.getTask()).rejects.toThrow(/^internal error$/);
  });

  it('hands an outage (Postgres unreachable) to the caller before hiding it, and a bug not', async () => {
    const seen: unknown[] = [];
    const unreachable = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const guarded = withoutInternalDetail(
      {
        getTask: () => Promise.reject(unreachable),
        cancelTask: () => Promise.reject(new TypeError('a bug')),
      } as unknown as MeshTaskHandler,
      (e) => seen.push(e),
    ) as unknown as Record<string, () => Promise<unknown>>;
    await expect(guarded.getTask()).rejects.toThrow(/^internal error$/);
    await expect(guarded.cancelTask()).rejects.toThrow(/^internal error$/);
    expect(seen).toEqual([unreachable]);
  });

  it("passes the protocol's errors and the answers as they are", async () => {
    await expect(handler.cancelTask()).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(handler.getAgentCard()).resolves.toEqual({ name: 'echo' });
  });

  it("hides a stream's failure midway, after the events before it", async () => {
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const n of handler.resubscribe() as AsyncGenerator<number>) seen.push(n);
      })(),
    ).rejects.toThrow(/^internal error$/);
    expect(seen).toEqual([1]);
  });
});

/** The SDK's v0.3 router behind a bare Fastify route, on a handler that fails (the runtime's failures faked). */
describe('serveLegacyRest', () => {
  const caller = { principal: 'anonymous', tenant: 'default', scopes: [], via: 'none' } as unknown as Caller;
  /** A loopback server of the one route; `get(path)` answers its status, headers and body. */
  const appOf = async (getTask: () => Promise<unknown>) => {
    const app = Fastify({ forceCloseConnections: true });
    // The SDK's transport reads the card (its capabilities) before it calls the method.
    const card = {
      name: 'echo',
      capabilities: {},
      supportedInterfaces: [
        { url: 'http://127.0.0.1/a2a/agents/echo/rest', protocolBinding: 'HTTP+JSON', protocolVersion: '0.3' },
      ],
    };
    const handler = { getTask, getAgentCard: () => Promise.resolve(card) } as unknown as MeshTaskHandler;
    app.get('/a2a/agents/:name/rest/v1/*', (request, reply) =>
      serveLegacyRest(handler, caller, {} as TaskStreams, request, reply),
    );
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    const get = async (path: string) => {
      const response = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(5000) });
      return {
        status: response.status,
        retryAfter: response.headers.get('retry-after'),
        body: (await response.json()) as unknown,
      };
    };
    return { get, close: () => app.close() };
  };

  it("answers an outage (Postgres unreachable) 503 with Retry-After, in v0.3's error shape with the runtime's code", async () => {
    const app = await appOf(() =>
      Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })),
    );
    expect(await app.get('/a2a/agents/echo/rest/v1/tasks/t1')).toEqual({
      status: 503,
      retryAfter: '1',
      body: {
        code: -32603,
        message: 'Postgres is unavailable; try again',
        data: { code: 'DEPENDENCY_UNAVAILABLE', dependency: 'postgres' },
      },
    });
    await app.close();
  });

  it('answers a bug 500 internal error, without its detail, and a protocol error with its status', async () => {
    const bug = await appOf(() => Promise.reject(new TypeError('x is undefined')));
    expect(await bug.get('/a2a/agents/echo/rest/v1/tasks/t1')).toMatchObject({
      status: 500,
      retryAfter: null,
      body: { code: -32603, message: 'internal error' },
    });
    await bug.close();
    const missing = await appOf(() => Promise.reject(new TaskNotFoundError('task t1 not found')));
    expect(await missing.get('/a2a/agents/echo/rest/v1/tasks/t1')).toMatchObject({
      status: 404,
      body: { code: -32001 },
    });
    await missing.close();
  });
});
