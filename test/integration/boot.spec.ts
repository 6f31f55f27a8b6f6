import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect, Socket } from 'node:net';
import { Client } from 'undici';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { uniqueTopic } from '../support/env';
import { InstanceProcess, WORKER_MAIN } from '../support/instance-process';
import { resetOwnership, temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * Boot behaviour of the real instance process: bad configuration and unreachable dependencies stop it with one
 * line on stderr and a non-zero exit; a missing or blank topology boots LOCAL_STICKY_PULL.
 */
describe('instance boot', () => {
  const instances: InstanceProcess[] = [];
  const instanceIds: string[] = [];
  afterEach(async () => {
    await Promise.all(instances.splice(0).map((i) => i.stop()));
  });
  afterAll(async () => {
    const temporal = await temporalClient();
    await terminateWorkflows(temporal.client, instanceIds.map(dispatchWorkflowIdOf));
    await temporal.close();
  });

  function start(overrides: Record<string, string>, main?: string): InstanceProcess {
    const id = `boot-${Math.random().toString(36).slice(2, 8)}`;
    instanceIds.push(id);
    const instance = InstanceProcess.spawn(
      {
        EVENTMESH_INSTANCE_ID: id,
        EVENTMESH_KAFKA_TOPICS: uniqueTopic('boot'),
        EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
        EVENTMESH_TEMPORAL_CONNECT_TIMEOUT_MS: '1500',
        EVENTMESH_KAFKA_CONNECT_TIMEOUT_MS: '1500',
        ...overrides,
      },
      main,
    );
    instances.push(instance);
    return instance;
  }

  /** The process failed with exactly one line on stderr, and no stack trace. */
  async function failsWithOneLine(instance: InstanceProcess, expectedCode: number): Promise<string> {
    const result = await instance.exit(60000);
    expect(result.code).toBe(expectedCode);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(result.stderr).not.toMatch(/^\s+at /m);
    return lines[0];
  }

  it('refuses an unknown topology, naming the key and the legal values', async () => {
    const line = await failsWithOneLine(start({ EVENTMESH_DELIVERY_TOPOLOGY: 'STICKY' }), 78);
    expect(line).toBe(
      'eventmesh: invalid configuration: EVENTMESH_DELIVERY_TOPOLOGY (eventmesh.delivery.topology) = "STICKY" ' +
        'is not valid; legal values: one of LOCAL_STICKY_PULL, PARTITION_OWNED_PULL',
    );
  });

  it('refuses an enforcing ingress gate behind an open admin gate, naming both keys and the legal values', async () => {
    const line = await failsWithOneLine(
      start({ EVENTMESH_SECURITY_GATE_FILTERS: 'token', EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true' }),
      78,
    );
    expect(line).toMatch(
      /^eventmesh: invalid configuration: EVENTMESH_ADMIN_SECURITY_FILTERS \(eventmesh\.admin\.security\.filters\) is empty .*EVENTMESH_SECURITY_GATE_FAIL_CLOSED=true.*legal values: token or token,acl/,
    );
  });

  it('refuses to start without a secrets key, naming the key and the legal values', async () => {
    const line = await failsWithOneLine(start({ EVENTMESH_SECURITY_SECRETS_KEYS: '' }), 78);
    expect(line).toMatch(
      /^eventmesh: invalid configuration: EVENTMESH_SECURITY_SECRETS_KEYS \(eventmesh\.security\.secrets\.keys\) is not set; .*Legal values: a comma-separated list of id:key/,
    );
  });

  it.each([
    ['missing', undefined],
    ['blank', '  '],
  ])('boots LOCAL_STICKY_PULL when the topology is %s', async (_, value) => {
    const overrides: Record<string, string> = value === undefined ? {} : { EVENTMESH_DELIVERY_TOPOLOGY: value };
    const instance = start(overrides);
    const url = await instance.ready();
    const health = (await (await fetch(`${url}/health`)).json()) as { topology: string; status: string };
    expect(health).toMatchObject({ status: 'up', topology: 'LOCAL_STICKY_PULL' });
  });

  it('refuses PARTITION_OWNED_PULL when no Temporal server answers', async () => {
    const line = await failsWithOneLine(
      start({ EVENTMESH_DELIVERY_TOPOLOGY: 'PARTITION_OWNED_PULL', EVENTMESH_TEMPORAL_ADDRESS: '127.0.0.1:1' }),
      1,
    );
    expect(line).toMatch(
      /^eventmesh: cannot reach Temporal at 127\.0\.0\.1:1 namespace "eventmesh-test" \(EVENTMESH_TEMPORAL_ADDRESS, EVENTMESH_TEMPORAL_NAMESPACE\): .+/,
    );
  });

  it('boots PARTITION_OWNED_PULL with a reachable Temporal: it joins, owns the partitions, and takes stream subscriptions', async () => {
    const temporal = await temporalClient();
    try {
      await resetOwnership(temporal.client);
      const topic = uniqueTopic('boot-owned');
      const instance = start({
        EVENTMESH_DELIVERY_TOPOLOGY: 'PARTITION_OWNED_PULL',
        EVENTMESH_KAFKA_TOPICS: topic,
        EVENTMESH_KAFKA_TOPIC_PARTITIONS: '2',
      });
      const url = await instance.ready();
      const health = (await (await fetch(`${url}/health`)).json()) as {
        topology: string;
        stats: { ownership: { confirmed: boolean; joins: number } };
      };
      expect(health).toMatchObject({
        topology: 'PARTITION_OWNED_PULL',
        stats: { ownership: { confirmed: true, joins: 1 } },
      });
      const owned = await waitFor('the instance to own both partitions', async () => {
        const view = (await (await fetch(`${url}/admin/partitions`)).json()) as {
          partitions: { topic: string; owner: string; polling: boolean }[];
        };
        // This spec's topic: the instance owns the partitions of every topic the runtime serves (other specs' too).
        const mine = view.partitions.filter((p) => p.topic === topic);
        return mine.length === 2 && mine.every((p) => p.polling) ? { partitions: mine } : false;
      });
      expect(owned.partitions.map((p) => p.owner)).toEqual([instanceIds.at(-1), instanceIds.at(-1)]);
      const stream = await fetch(`${url}/subscriptions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ protocol: 'STREAM', topic }),
      });
      expect(stream.status).toBe(201);
      expect(await stream.json()).toMatchObject({ protocol: 'STREAM', topic });
      expect((await instance.stop()).code).toBe(0);
    } finally {
      await resetOwnership(temporal.client);
      await temporal.close();
    }
  });

  it('PARTITION_OWNED_PULL runs at most EVENTMESH_DELIVERY_MAX_OWNED_PARTITIONS partitions at once, and says so naming the setting', async () => {
    const temporal = await temporalClient();
    try {
      await resetOwnership(temporal.client);
      const topic = uniqueTopic('boot-bound');
      const instance = start({
        EVENTMESH_DELIVERY_TOPOLOGY: 'PARTITION_OWNED_PULL',
        EVENTMESH_KAFKA_TOPICS: topic,
        EVENTMESH_KAFKA_TOPIC_PARTITIONS: '3',
        EVENTMESH_DELIVERY_MAX_OWNED_PARTITIONS: '2',
      });
      const id = instanceIds.at(-1)!;
      const url = await instance.ready();
      type View = {
        partitions: { topic: string; owner: string | null; polling: boolean; lease: { owner: string } | null }[];
      };
      const view = async () => (await (await fetch(`${url}/admin/partitions`)).json()) as View;
      await waitFor('the error naming the setting, and two runs claimed', async () => {
        const claimed = (await view()).partitions.filter((p) => p.lease?.owner === id).length;
        return instance.stdout.includes('its most (EVENTMESH_DELIVERY_MAX_OWNED_PARTITIONS)') && claimed >= 2;
      });
      // It owns every partition it announced (this spec's three at least); only two of them run (claimed).
      const after = await view();
      expect(after.partitions.filter((p) => p.owner === id).length).toBeGreaterThanOrEqual(3);
      expect(after.partitions.filter((p) => p.lease?.owner === id)).toHaveLength(2);
      expect(after.partitions.filter((p) => p.owner === id && p.polling)).toHaveLength(2);
    } finally {
      await resetOwnership(temporal.client);
      await temporal.close();
    }
  });

  it('answers the admin API with 409 WRONG_TOPOLOGY in LOCAL_STICKY_PULL', async () => {
    const url = await start({}).ready();
    const response = await fetch(`${url}/admin/partitions`);
    expect(response.status).toBe(409);
    expect(await response.json()).toMatchObject({ code: 'WRONG_TOPOLOGY' });
  });

  it('says in one line that Postgres is unreachable', async () => {
    const line = await failsWithOneLine(start({ EVENTMESH_POSTGRES_PORT: '1' }), 1);
    expect(line).toMatch(
      /^eventmesh: cannot connect to Postgres at 127\.0\.0\.1:1 database "eventmesh_test" as "eventmesh" \(EVENTMESH_POSTGRES_\*\): ECONNREFUSED$/,
    );
  });

  it('says in one line that the Postgres password is wrong', async () => {
    const line = await failsWithOneLine(start({ EVENTMESH_POSTGRES_PASSWORD: 'wrong' }), 1);
    expect(line).toMatch(/^eventmesh: cannot connect to Postgres .*password authentication failed/);
  });

  it('says in one line that Kafka is unreachable', async () => {
    const line = await failsWithOneLine(start({ EVENTMESH_KAFKA_BROKERS: '127.0.0.1:1' }), 1);
    expect(line).toMatch(/^eventmesh: cannot use Kafka at 127\.0\.0\.1:1 \(EVENTMESH_KAFKA_BROKERS\): .+/);
  });

  it('says in one line that the Temporal namespace does not exist', async () => {
    const line = await failsWithOneLine(start({ EVENTMESH_TEMPORAL_NAMESPACE: 'no-such-namespace' }), 1);
    expect(line).toMatch(/^eventmesh: cannot reach Temporal at .* namespace "no-such-namespace" .*not found/i);
  });

  it('says in one line that Temporal is unreachable', async () => {
    const line = await failsWithOneLine(start({ EVENTMESH_TEMPORAL_ADDRESS: '127.0.0.1:1' }), 1);
    expect(line).toMatch(/^eventmesh: cannot reach Temporal at 127\.0\.0\.1:1 /);
  });

  it('stops on SIGTERM while a client keeps publishing over one keep-alive connection, answering it 503 SHUTTING_DOWN', async () => {
    const instance = start({ EVENTMESH_INSTANCE_ROLES: 'gateway' });
    const url = await instance.ready();
    const client = new Client(url);
    /** Every answer the client got, in order: its status and the code of its body, if any. */
    const answers: { status: number; code?: string }[] = [];
    let publishing = true;
    const publisher = (async () => {
      for (let n = 0; publishing; n++) {
        try {
          const { statusCode, body } = await client.request({
            path: '/events/publish',
            method: 'POST',
            headers: { 'content-type': 'application/cloudevents+json' },
            body: JSON.stringify({ specversion: '1.0', id: `term-${n}`, source: '/boot', type: 't' }),
          });
          const answer = (await body.json()) as { code?: string };
          answers.push({ status: statusCode, code: answer.code });
        } catch {
          return; // the connection closed: the gateway is gone
        }
      }
    })();
    await waitFor('some publishes answered', () => answers.filter((a) => a.status === 202).length >= 20);
    // A publish that arrives on an open connection once the gateway is closing: its first header line is sent
    // before the SIGTERM (so the connection is busy, and stays open while the server drains), the rest after the
    // listener has closed (so the gateway is closing when the request arrives).
    const pending = await startRequest(url, 'POST /events/publish HTTP/1.1');
    instance.child.kill('SIGTERM');
    await waitFor('the listener to close', () => refusesConnections(url), { intervalMs: 20 });
    const late = await pending.finish(
      { 'content-type': 'application/cloudevents+json' },
      JSON.stringify({ specversion: '1.0', id: 'term-late', source: '/boot', type: 't' }),
    );
    const result = await instance.exit(30000);
    publishing = false;
    await publisher;
    await client.close();
    expect(result.code).toBe(0);
    // Every answer is an acknowledgement or the shutdown refusal (that one connection alone seldom meets the
    // refusal: its request in flight is acknowledged with `connection: close`, and the listener is gone by the time
    // it reconnects; the late request below meets it every time).
    expect(answers.filter((a) => a.status !== 202 && !(a.status === 503 && a.code === 'SHUTTING_DOWN'))).toEqual([]);
    expect(late).toMatchObject({ status: 503, body: { code: 'SHUTTING_DOWN' }, connection: 'close' });
  }, 180000);

  it('refuses EVENTMESH_HTTP_PROCESSES=2 for the worker entry point, naming the key', async () => {
    const line = await failsWithOneLine(
      start({ EVENTMESH_INSTANCE_ROLES: 'gateway', EVENTMESH_HTTP_PROCESSES: '2' }, WORKER_MAIN),
      78,
    );
    expect(line).toMatch(
      /^eventmesh: invalid configuration: EVENTMESH_HTTP_PROCESSES \(eventmesh\.http\.processes\) = 2 is for a gateway-only instance; this entry point runs the worker role: legal values: 1$/,
    );
  });

  describe('with EVENTMESH_HTTP_PROCESSES=2 (a gateway-only instance)', () => {
    const gatewayOnly = (overrides: Record<string, string> = {}) =>
      start({ EVENTMESH_INSTANCE_ROLES: 'gateway', EVENTMESH_HTTP_PROCESSES: '2', ...overrides });
    const childrenOf = (pid: number) =>
      execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
        .split('\n')
        .map(Number)
        .filter(Boolean);
    /** The processes that answer /health over new connections, which the primary deals out in turn. */
    async function pidsAnswering(url: string): Promise<Set<number>> {
      const pids = new Set<number>();
      for (let i = 0; i < 6; i++) {
        const health = (await (await fetch(`${url}/health`, { headers: { connection: 'close' } })).json()) as {
          pid: number;
          instance: string;
        };
        pids.add(health.pid);
      }
      return pids;
    }

    it('serves from two processes on one port, replaces one that dies, and stops both on SIGTERM', async () => {
      const instance = gatewayOnly();
      const url = await instance.ready();
      expect(instance.stdout).toMatch(/instance \S+ \(2 gateway processes\) listening on/);
      expect(await pidsAnswering(url)).toEqual(new Set(childrenOf(instance.child.pid!)));

      const publishes = await Promise.all(
        Array.from({ length: 40 }, (_, n) =>
          fetch(`${url}/events/publish`, {
            method: 'POST',
            headers: { 'content-type': 'application/cloudevents+json', connection: 'close' },
            body: JSON.stringify({ specversion: '1.0', id: `clu-${n}`, source: '/boot', type: 't' }),
          }),
        ),
      );
      expect(publishes.map((r) => r.status)).toEqual(Array(40).fill(202));

      const [victim] = childrenOf(instance.child.pid!);
      process.kill(victim, 'SIGKILL');
      await waitFor(
        'a new gateway process in place of the killed one',
        () => {
          const children = childrenOf(instance.child.pid!);
          return children.length === 2 && !children.includes(victim);
        },
        { timeoutMs: 60000 },
      );
      const children = childrenOf(instance.child.pid!);
      await waitFor(
        'both processes answering again',
        async () => {
          const pids = await pidsAnswering(url).catch(() => new Set<number>());
          return pids.size === 2 && children.every((pid) => pids.has(pid));
        },
        { timeoutMs: 60000 },
      );

      const result = await instance.stop();
      expect(result.code).toBe(0);
      expect(children.filter((pid) => existsSync(`/proc/${pid}`))).toEqual([]);
    });

    it('stops with exit code 1 when the gateway processes cannot start, each saying why in one line', async () => {
      const result = await gatewayOnly({ EVENTMESH_KAFKA_BROKERS: '127.0.0.1:1' }).exit(60000);
      expect(result.code).toBe(1);
      const lines = result.stderr.trim().split('\n');
      expect(lines.every((line) => line.startsWith('eventmesh: '))).toBe(true);
      expect(lines).toEqual(
        expect.arrayContaining([expect.stringMatching(/^eventmesh: cannot use Kafka at 127\.0\.0\.1:1 /)]),
      );
      expect(lines).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^eventmesh: gateway process \d failed to start \(exit code 1\); stopping$/),
        ]),
      );
    });
  });
});

/** True when nothing listens on the URL's port any more. */
function refusesConnections(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
  });
}

/**
 * An HTTP/1.1 request sent in two parts over a raw connection: `firstLine` now, the headers and body on
 * `finish`, which resolves with the answer (within 60 s).
 */
async function startRequest(url: string, firstLine: string) {
  const { hostname, port } = new URL(url);
  const socket: Socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let raw = Buffer.alloc(0);
  const answered = new Promise<{ head: string; payload: string }>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no answer within 60 s; got ${JSON.stringify(raw.toString())}`)),
      60000,
    );
    const done = (value: { head: string; payload: string }) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(value);
    };
    socket.on('data', (c: Buffer) => {
      raw = Buffer.concat([raw, c]);
      const at = raw.indexOf('\r\n\r\n');
      if (at === -1) return;
      const head = raw.subarray(0, at).toString();
      const length = Number(/^content-length: *(\d+)/im.exec(head)?.[1] ?? 0);
      if (raw.length >= at + 4 + length) done({ head, payload: raw.subarray(at + 4, at + 4 + length).toString() });
    });
    socket.once('close', () => {
      clearTimeout(timer);
      reject(new Error(`connection closed without an answer; got ${JSON.stringify(raw.toString())}`));
    });
  });
  answered.catch(() => undefined); // awaited in finish()
  socket.write(`${firstLine}\r\nhost: ${hostname}\r\n`);
  return {
    async finish(headers: Record<string, string>, body: string) {
      const lines = Object.entries({ ...headers, 'content-length': String(Buffer.byteLength(body)) }).map(
        ([k, v]) => `${k}: ${v}\r\n`,
      );
      socket.write(`${lines.join('')}\r\n${body}`);
      const { head, payload } = await answered;
      const connection = /^connection: *(.*)$/im.exec(head)?.[1]?.trim();
      return {
        status: Number(head.split(' ')[1]),
        body: payload ? (JSON.parse(payload) as unknown) : undefined,
        connection,
      };
    },
  };
}
