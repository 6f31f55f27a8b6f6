import { randomUUID } from 'node:crypto';
import { Message, SendMessageRequest, Task, TaskState } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { BenchEchoAgent } from '../../bench/a2a-echo-agent';

/**
 * The bundled echo agent (`npm run agent:echo`) answers as an A2A v1.0 JSON-RPC server does: a request it cannot
 * serve (one without `A2A-Version`, which is a v0.3 request, to an agent that speaks 1.0) is a JSON-RPC error with
 * the request's id, never a bare 500; a request of the stock SDK client (which sends `A2A-Version: 1.0`) is served.
 */
describe('the bundled echo agent', () => {
  const agent = new BenchEchoAgent();
  let url: string;

  beforeAll(async () => {
    url = await agent.start();
  });
  afterAll(() => agent.kill());

  const sendMessage = {
    jsonrpc: '2.0',
    id: 'r-1',
    method: 'SendMessage',
    params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] } },
  };

  it('answers a request without A2A-Version with the JSON-RPC error VersionNotSupported, naming the request', async () => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(sendMessage),
    });
    expect([response.status, response.headers.get('content-type')]).toEqual([200, 'application/json']);
    const body = (await response.json()) as { jsonrpc: string; id: unknown; error?: { code: number; message: string } };
    expect([body.jsonrpc, body.id, body.error?.code]).toEqual(['2.0', 'r-1', -32009]);
    expect(body.error?.message).toMatch(/'0\.3' is not supported/);
  });

  it('serves the stock SDK client', async () => {
    const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(url);
    const answer = (await client.sendMessage(
      SendMessageRequest.fromJSON({
        message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'through the SDK' }] },
      }),
    )) as Task | Message;
    expect('status' in answer ? answer.status?.state : undefined).toBe(TaskState.TASK_STATE_COMPLETED);
  });
});
