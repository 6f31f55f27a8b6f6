import { randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { createServer, IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AgentCard, Message, Role, SendMessageRequest, TaskState } from '@a2a-js/sdk';
import {
  AgentEvent,
  AgentExecutor,
  DefaultRequestHandler,
  ExecutionEventBus,
  InMemoryTaskStore,
  JsonRpcTransportHandler,
  RequestContext,
  ServerCallContext,
  validateVersion,
} from '@a2a-js/sdk/server';

/**
 * The echo agent of `npm run bench:a2a` and `npm run agent:echo` (scripts/echo-agent.ts): an A2A server built from the SDK's own server classes
 * (DefaultRequestHandler, InMemoryTaskStore, JsonRpcTransportHandler, A2A v1.0 JSON-RPC) on a loopback HTTP server,
 * which also serves its card at `/.well-known/agent-card.json`. Each task completes at once with an artifact
 * holding the text it was sent. It counts the texts it answered a completion for (each text is unique per task
 * the benchmark sends): a text answered twice is a task the agent completed twice.
 *
 * `kill()` closes the server abruptly (every open connection destroyed, requests in flight unanswered) and
 * `start()` again listens on the same port; its task store survives, as that of an agent whose tasks are kept
 * outside its server process would. With `answersFile`, each text it answers a completion for is also appended to
 * that file (a line each, written before the answer is sent), so that another process counts them across a kill of
 * this one (the benchmark's burst, bench/a2a.bench.ts).
 */
export class BenchEchoAgent {
  private server?: Server;
  private port: number;
  private readonly store = new InMemoryTaskStore();
  private transport?: JsonRpcTransportHandler;
  private agentCard?: AgentCard;
  /** How many completions the agent answered for each text. */
  readonly answered = new Map<string, number>();
  completions = 0;
  url = '';

  /** `port`: where it listens on loopback (0, the default: a free port); `name`: its card's name. */
  constructor(private readonly options: { port?: number; name?: string; answersFile?: string } = {}) {
    this.port = options.port ?? 0;
  }

  card(): Record<string, unknown> {
    return {
      name: this.options.name ?? 'bench-echo',
      description: 'echoes what it is sent',
      version: '1.0.0',
      supportedInterfaces: [{ url: this.url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      capabilities: { streaming: false, pushNotifications: false },
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: [{ id: 'echo', name: 'Echo', description: 'echoes text', tags: ['bench'] }],
    };
  }

  /** Listens on loopback (the port it had before, after a kill); the URL in its card. */
  async start(): Promise<string> {
    const server = createServer((request, response) => {
      if (request.method === 'GET' && request.url === '/.well-known/agent-card.json') {
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(this.card()));
        return;
      }
      void this.serve(request).then(
        (answer) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer)),
        (e: unknown) =>
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jsonRpcErrorOf(e))),
      );
    });
    server.keepAliveTimeout = 60000;
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(this.port, '127.0.0.1', resolve));
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    this.url = `http://127.0.0.1:${this.port}/`;
    if (!this.transport) {
      const handler = new DefaultRequestHandler(AgentCard.fromJSON(this.card()), this.store, this.executor());
      this.transport = new JsonRpcTransportHandler(handler);
      this.agentCard = await handler.getAgentCard();
    }
    return this.url;
  }

  /** Closes the server abruptly: open connections are destroyed, requests in flight get no answer. */
  async kill(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }

  /** Texts answered more than once, and how often. */
  duplicates(prefix: string): [string, number][] {
    return [...this.answered].filter(([text, n]) => text.startsWith(prefix) && n > 1);
  }

  private async serve(request: IncomingMessage): Promise<unknown> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    // A request without A2A-Version is a v0.3 one (A2A v1.0, "Versioning"): this agent speaks 1.0 only.
    const version = (request.headers['a2a-version'] as string | undefined) ?? '0.3';
    try {
      validateVersion(version, this.agentCard!, 'JSONRPC');
    } catch (e) {
      throw Object.assign(e as Error, { id: idOf(body) });
    }
    return this.transport!.handle(body, new ServerCallContext({ requestedVersion: version }));
  }

  private executor(): AgentExecutor {
    return {
      execute: (ctx: RequestContext, bus: ExecutionEventBus) => {
        const text = textOf(ctx.userMessage);
        const now = new Date().toISOString();
        bus.publish(
          AgentEvent.task({
            id: ctx.taskId,
            contextId: ctx.contextId,
            status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now },
            artifacts: [],
            history: [ctx.userMessage],
            metadata: undefined,
          }),
        );
        bus.publish(
          AgentEvent.artifactUpdate({
            taskId: ctx.taskId,
            contextId: ctx.contextId,
            artifact: {
              artifactId: randomUUID(),
              name: 'echo',
              description: '',
              parts: [textPart(text)],
              metadata: undefined,
              extensions: [],
            },
            append: false,
            lastChunk: true,
            metadata: undefined,
          }),
        );
        bus.publish(
          AgentEvent.statusUpdate({
            taskId: ctx.taskId,
            contextId: ctx.contextId,
            status: { state: TaskState.TASK_STATE_COMPLETED, message: agentText(ctx, text), timestamp: now },
            metadata: undefined,
          }),
        );
        this.answered.set(text, (this.answered.get(text) ?? 0) + 1);
        this.completions++;
        if (this.options.answersFile) appendFileSync(this.options.answersFile, `${text}\n`);
        return Promise.resolve();
      },
      cancelTask: (taskId: string, bus: ExecutionEventBus) => {
        bus.publish(
          AgentEvent.statusUpdate({
            taskId,
            contextId: '',
            status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() },
            metadata: undefined,
          }),
        );
        return Promise.resolve();
      },
    };
  }
}

function textPart(text: string) {
  return {
    content: { $case: 'text' as const, value: text },
    metadata: undefined,
    filename: '',
    mediaType: 'text/plain',
  };
}

function agentText(ctx: RequestContext, text: string): Message {
  return {
    messageId: randomUUID(),
    contextId: ctx.contextId,
    taskId: ctx.taskId,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The first text part of a message ('' when it has none). */
export function textOf(message: Pick<Message, 'parts'> | undefined): string {
  for (const part of message?.parts ?? []) if (part.content?.$case === 'text') return part.content.value;
  return '';
}

/** A send of one text part to the echo agent (blocking, or answered at once with `returnImmediately`). */
export function echoRequest(text: string, returnImmediately = false): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
    configuration: { returnImmediately },
  });
}

/** A2A v1.0's JSON-RPC code of `VersionNotSupportedError` (the SDK's A2A_ERROR_CODE, not exported). */
const VERSION_NOT_SUPPORTED = -32009;
const INTERNAL_ERROR = -32603;

/** The request's JSON-RPC id, when its body has one. */
function idOf(body: string): string | number | null {
  try {
    const id = (JSON.parse(body) as { id?: unknown }).id;
    return typeof id === 'string' || typeof id === 'number' ? id : null;
  } catch {
    return null;
  }
}

/** A request the agent cannot serve, answered as JSON-RPC says (an error object, the request's id), never as a bare 500. */
function jsonRpcErrorOf(e: unknown): {
  jsonrpc: '2.0';
  id: string | number | null;
  error: { code: number; message: string };
} {
  const error = e as { name?: string; message?: string; id?: string | number | null };
  const code = error.name === 'VersionNotSupportedError' ? VERSION_NOT_SUPPORTED : INTERNAL_ERROR;
  return { jsonrpc: '2.0', id: error.id ?? null, error: { code, message: error.message ?? String(e) } };
}
