import { randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentCard, Message, Role, TaskState } from '@a2a-js/sdk';
import {
  AgentEvent,
  AgentExecutionEvent,
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
 * A test A2A agent built from the SDK's own server pieces (DefaultRequestHandler, InMemoryTaskStore,
 * JsonRpcTransportHandler) on a loopback HTTP server. What it does depends on the first text part it receives:
 * - `echo:<text>`: completes with an artifact holding `<text>`;
 * - `reply:<text>`: answers a Message (no task);
 * - `park`: reports `working` and returns (the task stays working until it is canceled);
 * - `hold:<key>`: reports `working`, then completes only when the test calls `release(key)`;
 * - `work:<ms>:<text>`: reports `working`, works `<ms>` ms, then completes with an artifact holding `<text>` (a
 *   load of tasks that are in flight for a while);
 * - `ask:<question>`: asks for input (`input-required`, its status message `<question>`); the message continuing the
 *   task (any text) completes it with an artifact holding `answered <text>`, or asks again if that text is `ask:...`;
 * - `garble:<text>`: answers the send with a JSON-RPC result that is neither a task nor a message (not A2A);
 * - `huge:<bytes>`: answers the send as `garble:` does, padded to more than <bytes> bytes (an answer too large to read);
 * - `steps:<key>`: reports `working` with status messages `step 1` and `step 2` at once, an artifact `result` in two
 *   chunks (`forty-`, then `two` appended), then waits for `release(key)`, reports `step 3` and completes (`done`).
 * With `streaming` its card says it streams, and it serves the streaming methods (SSE); else it serves JSON only.
 */
export class EchoAgent {
  constructor(private readonly options: { streaming?: boolean } = {}) {}

  /** The JSON-RPC methods it was called with, in order (`SendMessage`, `SendStreamingMessage`, `GetTask`, ...). */
  readonly methods: string[] = [];
  private server?: Server;
  private readonly held = new Map<string, () => void>();
  /** Keys of the `hold:` tasks that reached their completion (after their release). */
  readonly completed = new Set<string>();
  /** Ids (the agent's) of the tasks it was asked to cancel. */
  readonly canceled = new Set<string>();
  /** Texts of the messages it was sent, in order (one per task it took). */
  readonly received: string[] = [];
  url = '';

  card(): Record<string, unknown> {
    return {
      name: 'echo',
      description: 'echoes what it is sent',
      version: '1.0.0',
      supportedInterfaces: [{ url: this.url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      capabilities: { streaming: this.options.streaming === true, pushNotifications: false },
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: [{ id: 'echo', name: 'Echo', description: 'echoes text', tags: ['text', 'test'] }],
    };
  }

  /** Lets the `hold:<key>` task complete; resolves once it is waiting to be released. */
  release(key: string): boolean {
    const resume = this.held.get(key);
    resume?.();
    return resume !== undefined;
  }

  isHeld(key: string): boolean {
    return this.held.has(key);
  }

  /** Cuts every connection open to it (a stream of its events breaks mid-task); it goes on listening. */
  dropConnections(): void {
    this.server?.closeAllConnections();
  }

  /** Listens on `port` (0: any free one; a fixed one to come back where a registered card says the agent is). */
  async start(port = 0): Promise<string> {
    const server = createServer((request, response) => {
      void this.serve(request)
        .then(async (answer) => {
          if (!isStream(answer))
            return void response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
          response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
          for await (const event of answer) response.write(`data: ${JSON.stringify(event)}\n\n`);
          response.end();
        })
        .catch((e: unknown) => (response.headersSent ? response.destroy() : response.writeHead(500).end(String(e))));
    });
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
    this.server = server;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const handler = new DefaultRequestHandler(
      AgentCard.fromJSON(this.card()),
      new InMemoryTaskStore(),
      this.executor(),
    );
    this.transport = new JsonRpcTransportHandler(handler);
    this.agentCard = await handler.getAgentCard();
    return this.url;
  }

  /** Dies as a process would: its connections cut, its tasks (held ones too) gone with it, never completed. */
  async crash(): Promise<void> {
    this.held.clear();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = undefined;
  }

  async close(): Promise<void> {
    for (const resume of this.held.values()) resume();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private transport?: JsonRpcTransportHandler;
  private agentCard?: AgentCard;

  private async serve(request: IncomingMessage): Promise<unknown> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const version = (request.headers['a2a-version'] as string | undefined) ?? '0.3';
    validateVersion(version, this.agentCard!, 'JSONRPC');
    const body = Buffer.concat(chunks).toString('utf8');
    const rpc = JSON.parse(body) as {
      id?: unknown;
      method?: unknown;
      params?: { message?: { parts?: { text?: unknown }[] } };
    };
    this.methods.push(String(rpc.method));
    const first = rpc.params?.message?.parts?.[0]?.text;
    if (rpc.method === 'SendMessage' && typeof first === 'string' && first.startsWith('garble:')) {
      this.received.push(first);
      return { jsonrpc: '2.0', id: rpc.id, result: {} };
    }
    if (rpc.method === 'SendMessage' && typeof first === 'string' && first.startsWith('huge:')) {
      this.received.push(first);
      return { jsonrpc: '2.0', id: rpc.id, result: {}, padding: 'x'.repeat(Number(first.slice('huge:'.length))) };
    }
    return this.transport!.handle(body, new ServerCallContext({ requestedVersion: version }));
  }

  /** The `steps:<key>` task (see the class). */
  private async steps(
    ctx: RequestContext,
    bus: ExecutionEventBus,
    key: string,
    status: (ctx: RequestContext, state: TaskState, text?: string) => AgentExecutionEvent,
  ): Promise<void> {
    bus.publish(status(ctx, TaskState.TASK_STATE_WORKING, 'step 1'));
    bus.publish(status(ctx, TaskState.TASK_STATE_WORKING, 'step 2'));
    const chunk = (text: string, append: boolean) =>
      AgentEvent.artifactUpdate({
        taskId: ctx.taskId,
        contextId: ctx.contextId,
        artifact: {
          artifactId: 'result',
          name: 'result',
          description: '',
          parts: [textPart(text)],
          metadata: undefined,
          extensions: [],
        },
        append,
        lastChunk: append,
        metadata: undefined,
      });
    bus.publish(chunk('forty-', false));
    bus.publish(chunk('two', true));
    await new Promise<void>((resume) => this.held.set(key, resume));
    this.held.delete(key);
    this.completed.add(key);
    bus.publish(status(ctx, TaskState.TASK_STATE_WORKING, 'step 3'));
    bus.publish(status(ctx, TaskState.TASK_STATE_COMPLETED, 'done'));
  }

  private executor(): AgentExecutor {
    const status = (ctx: RequestContext, state: TaskState, text?: string) =>
      AgentEvent.statusUpdate({
        taskId: ctx.taskId,
        contextId: ctx.contextId,
        status: {
          state,
          timestamp: new Date().toISOString(),
          message: text === undefined ? undefined : agentText(ctx, text),
        },
        metadata: undefined,
      });
    return {
      execute: async (ctx: RequestContext, bus: ExecutionEventBus) => {
        const text = textOf(ctx.userMessage);
        this.received.push(text);
        if (ctx.task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
          // A message continuing a task that asked for input.
          bus.publish(status(ctx, TaskState.TASK_STATE_WORKING));
          if (text.startsWith('ask:')) {
            bus.publish(status(ctx, TaskState.TASK_STATE_INPUT_REQUIRED, text.slice('ask:'.length)));
            return;
          }
          bus.publish(
            AgentEvent.artifactUpdate({
              taskId: ctx.taskId,
              contextId: ctx.contextId,
              artifact: {
                artifactId: randomUUID(),
                name: 'answer',
                description: '',
                parts: [textPart(`answered ${text}`)],
                metadata: undefined,
                extensions: [],
              },
              append: false,
              lastChunk: true,
              metadata: undefined,
            }),
          );
          bus.publish(status(ctx, TaskState.TASK_STATE_COMPLETED, `answered ${text}`));
          return;
        }
        if (text.startsWith('reply:')) {
          bus.publish(AgentEvent.message({ ...agentText(ctx, text.slice('reply:'.length)), taskId: '' }));
          return;
        }
        bus.publish(
          AgentEvent.task({
            id: ctx.taskId,
            contextId: ctx.contextId,
            status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
            artifacts: [],
            history: [ctx.userMessage],
            metadata: undefined,
          }),
        );
        bus.publish(status(ctx, TaskState.TASK_STATE_WORKING));
        if (text.startsWith('ask:')) {
          bus.publish(status(ctx, TaskState.TASK_STATE_INPUT_REQUIRED, text.slice('ask:'.length)));
          return;
        }
        if (text === 'park') return;
        if (text.startsWith('steps:')) return this.steps(ctx, bus, text.slice('steps:'.length), status);
        if (text.startsWith('hold:')) {
          const key = text.slice('hold:'.length);
          await new Promise<void>((resume) => this.held.set(key, resume));
          this.held.delete(key);
          this.completed.add(key);
        }
        const work = /^work:(\d+):(.*)$/s.exec(text);
        if (work) await sleep(Number(work[1]), undefined, { ref: false });
        const echoed = work ? work[2] : text.startsWith('echo:') ? text.slice('echo:'.length) : text;
        bus.publish(
          AgentEvent.artifactUpdate({
            taskId: ctx.taskId,
            contextId: ctx.contextId,
            artifact: {
              artifactId: randomUUID(),
              name: 'echo',
              description: '',
              parts: [textPart(echoed)],
              metadata: undefined,
              extensions: [],
            },
            append: false,
            lastChunk: true,
            metadata: undefined,
          }),
        );
        bus.publish(status(ctx, TaskState.TASK_STATE_COMPLETED, `echoed ${echoed}`));
      },
      cancelTask: async (taskId: string, bus: ExecutionEventBus) => {
        this.canceled.add(taskId);
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

function isStream(answer: unknown): answer is AsyncGenerator<unknown> {
  return typeof (answer as AsyncGenerator<unknown> | null)?.[Symbol.asyncIterator] === 'function';
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
export function textOf(message: Message | undefined): string {
  for (const part of message?.parts ?? []) if (part.content?.$case === 'text') return part.content.value;
  return '';
}
