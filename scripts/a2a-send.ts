import { randomUUID } from 'node:crypto';
import { Message, Role, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { textOf } from '../bench/a2a-echo-agent';

/**
 * `npm run a2a:send -- <agent> <text> [--mesh http://127.0.0.1:8080] [--token <bearer token>]`: sends one task to a
 * registered agent through the mesh with `@a2a-js/sdk`'s stock client, made from nothing but the card URL the mesh
 * serves for the agent, as a blocking `SendMessage`; prints the task the mesh answers (its id, state and artifacts'
 * text) and a link to its workflow `a2a-task/<id>` in the Temporal UI (EVENTMESH_TEMPORAL_UI_URL, default
 * http://127.0.0.1:8233; EVENTMESH_TEMPORAL_NAMESPACE, default `default`). Exit code 0 when the task completed (or
 * the agent answered with a message, which ends the exchange), 1 otherwise, 64 on bad arguments. After `--`, every
 * argument is positional (a text that begins with `--`).
 */
const USAGE = 'usage: npm run a2a:send -- <agent> <text> [--mesh http://127.0.0.1:8080] [--token <bearer token>]';

function parse(argv: string[]): { agent: string; text: string; mesh: string; token?: string } {
  const positional: string[] = [];
  const flags: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (argv[i] === '--mesh' || argv[i] === '--token') {
      if (argv[i + 1] === undefined) usage(`${argv[i]} needs a value`);
      flags[argv[i].slice(2)] = argv[++i];
    } else if (argv[i].startsWith('--')) usage(`unknown option ${argv[i]}`);
    else positional.push(argv[i]);
  }
  if (positional.length !== 2) usage('an agent name and a text are needed');
  const mesh = (flags.mesh ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+$/.test(mesh)) usage(`--mesh: ${JSON.stringify(mesh)} is not an http(s) origin`);
  return { agent: positional[0], text: positional[1], mesh, token: flags.token };
}

function usage(problem: string): never {
  process.stderr.write(`${problem}\n${USAGE}\n`);
  process.exit(64);
}

async function main(): Promise<void> {
  const { agent, text, mesh, token } = parse(process.argv.slice(2));
  const fetchImpl: typeof fetch = token
    ? (input, init) => {
        const headers = new Headers(init?.headers);
        headers.set('authorization', `Bearer ${token}`);
        return fetch(input, { ...init, headers });
      }
    : fetch;
  const cardUrl = `${mesh}/a2a/agents/${encodeURIComponent(agent)}/.well-known/agent-card.json`;
  const factory = new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  });
  const client = await factory.createFromUrl(cardUrl, '');
  const message: Message = {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    contextId: '',
    taskId: '',
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
  const answer = await client.sendMessage(
    { tenant: '', message, configuration: undefined, metadata: undefined },
    { signal: AbortSignal.timeout(60000) },
  );
  if (!('status' in answer)) {
    process.stdout.write(`the agent answered a message: ${JSON.stringify(Message.toJSON(answer))}\n`);
    return;
  }
  if (!answer.status) throw new Error(`the mesh answered task ${answer.id} without a status`);
  const state = taskStateToJSON(answer.status.state);
  const ui = (process.env.EVENTMESH_TEMPORAL_UI_URL ?? 'http://127.0.0.1:8233').replace(/\/+$/, '');
  const namespace = process.env.EVENTMESH_TEMPORAL_NAMESPACE ?? 'default';
  process.stdout.write(
    `task ${answer.id}: ${state}\n` +
      `  artifacts: ${JSON.stringify(answer.artifacts.map(textOf))}\n` +
      `  its workflow a2a-task/${answer.id} in the Temporal UI: ${ui}/namespaces/${namespace}/workflows?query=${encodeURIComponent(`WorkflowId="a2a-task/${answer.id}"`)}\n`,
  );
  if (state !== 'TASK_STATE_COMPLETED') process.exitCode = 1;
}

main().catch((e: unknown) => {
  process.stderr.write(`a2a:send: ${(e as Error).message}\n`);
  process.exit(1);
});
