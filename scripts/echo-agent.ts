import { parseArgs } from 'node:util';
import { BenchEchoAgent } from '../bench/a2a-echo-agent';

const USAGE = 'usage: npm run agent:echo [-- --port 9000] [--name echo] [--answers FILE]';

/**
 * `npm run agent:echo [-- --port 9000]`: an A2A agent to try the broker with (docs/a2a.md, "Try it"): the echo agent
 * of `npm run bench:a2a`, an A2A v1.0 JSON-RPC server built from `@a2a-js/sdk`'s own server classes, on loopback.
 * Each task it is sent completes at once with an artifact holding the text it was sent. Its card is at
 * `/.well-known/agent-card.json`. Ctrl-C stops it. `--name` names its card (`echo`); `--answers FILE` appends each
 * text it completes a task for to FILE, a line each (the benchmark's burst runs it so, and kills it).
 */
function optionsOf(argv: string[]): { port: number; name: string; answersFile?: string } {
  let values: { port?: string; name?: string; answers?: string };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { port: { type: 'string' }, name: { type: 'string' }, answers: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    refuse((e as Error).message);
  }
  const port = values.port === undefined ? 9000 : /^\d{1,5}$/.test(values.port) ? Number(values.port) : NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    refuse(`--port: ${JSON.stringify(values.port)} is not a port (an integer from 0, any free one, to 65535)`);
  if (values.name !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(values.name))
    refuse(`--name: ${JSON.stringify(values.name)} is not a name (letters, digits, '.', '_', '-', at most 64)`);
  if (values.answers === '') refuse('--answers: a file path is needed');
  return { port, name: values.name ?? 'echo', answersFile: values.answers };
}

function refuse(problem: string): never {
  process.stderr.write(`${problem}\n${USAGE}\n`);
  process.exit(64);
}

async function main(): Promise<void> {
  const agent = new BenchEchoAgent(optionsOf(process.argv.slice(2)));
  const url = await agent.start().catch((e: unknown) => {
    process.stderr.write(`echo agent: cannot listen: ${(e as Error).message}\n`);
    process.exit(1);
  });
  process.stdout.write(
    `echo agent: A2A v1.0 JSON-RPC at ${url} (its card: ${url}.well-known/agent-card.json); Ctrl-C stops it\n`,
  );
  const stop = () => void agent.kill().then(() => process.exit(0));
  process.once('SIGINT', stop).once('SIGTERM', stop);
}

void main();
