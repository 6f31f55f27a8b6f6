import { BenchEchoAgent } from '../bench/a2a-echo-agent';

/**
 * `npm run agent:echo [-- --port 9000]`: an A2A agent to try the broker with (README, "An A2A agent"): the echo agent
 * of `npm run bench:a2a`, an A2A v1.0 JSON-RPC server built from `@a2a-js/sdk`'s own server classes, on loopback.
 * Each task it is sent completes at once with an artifact holding the text it was sent. Its card is at
 * `/.well-known/agent-card.json`. Ctrl-C stops it.
 */
function portArg(argv: string[]): number {
  if (argv.length === 0) return 9000;
  const port = Number(argv[1]);
  if (argv[0] !== '--port' || argv.length !== 2) refuse(`unexpected arguments: ${argv.join(' ')}`);
  if (!Number.isInteger(port) || port < 1 || port > 65535) refuse(`--port: ${JSON.stringify(argv[1])} is not a port (an integer from 1 to 65535)`);
  return port;
}

function refuse(problem: string): never {
  process.stderr.write(`${problem}\nusage: npm run agent:echo [-- --port 9000]\n`);
  process.exit(64);
}

async function main(): Promise<void> {
  const agent = new BenchEchoAgent({ port: portArg(process.argv.slice(2)), name: 'echo' });
  const url = await agent.start().catch((e: unknown) => {
    process.stderr.write(`echo agent: cannot listen: ${(e as Error).message}\n`);
    process.exit(1);
  });
  process.stdout.write(`echo agent: A2A v1.0 JSON-RPC at ${url} (its card: ${url}.well-known/agent-card.json); Ctrl-C stops it\n`);
  const stop = () => void agent.kill().then(() => process.exit(0));
  process.once('SIGINT', stop).once('SIGTERM', stop);
}

void main();
