import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  AgentGoneError,
  AgentNotFoundError,
  AuthError,
  EventMeshClient,
  SessionCancelledError,
  SessionClosedError,
  SessionEndedError,
  SlowSubscriberError,
  type Publication,
  type SessionSubscription,
} from '@eventmesh/client';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { parsePrometheusText, sampleOf } from '../support/prometheus-text';
import { SessionAgentProcess } from '../support/session-agent-process';
import { TcpProxy } from '../support/tcp-proxy';
import { TokenIssuer } from '../support/token-issuer';
import { waitFor } from '../support/wait-for';

const ISSUER = 'https://issuer.sessions.test';
const AUDIENCE = 'eventmesh-sessions';

/**
 * Streaming sessions, Mode 1 (docs/streaming-sessions.md), on two real instance processes behind an enforcing token
 * gate with the ACL: A and B run every role (LOCAL_STICKY_PULL; sessions never touch Kafka, so the delivery topology
 * does not matter). Callers and agents are SDK clients in this process, or agent processes of their own where one is
 * killed. The cases run in order on one pair of instances.
 */
describe('streaming sessions (Mode 1), end to end', () => {
  const topic = uniqueTopic('sessions');
  let a: InstanceProcess;
  let b: InstanceProcess;
  const tokens = new Map<string, string>();
  const clients: EventMeshClient[] = [];
  const agents: SessionAgentProcess[] = [];

  const tokenOf = (tenant: string, principal = 'alice') => tokens.get(`${tenant}/${principal}`)!;
  /** Sessions whose call the 'endless' agent saw cancelled. */
  const cancelledAtAgent = new Set<string>();
  const client = (url: string, tenant = 't1', principal = 'alice') => {
    const mesh = new EventMeshClient({ url, token: tokenOf(tenant, principal) });
    clients.push(mesh);
    return mesh;
  };

  /** Waits until `count` replicas of `agent` (tenant t1) are listed by `/admin/sessions`: their presence rows written. */
  const replicasKnown = (agent: string, count: number) =>
    waitFor(`${count} replicas of ${agent} in /admin/sessions`, async () => {
      const view = (await (
        await fetch(`${a.url}/admin/sessions`, { headers: { authorization: `Bearer ${tokenOf('t1')}` } })
      ).json()) as { agents: { agent: string; replicas: unknown[] }[] };
      return view.agents.find((x) => x.agent === agent)?.replicas.length === count;
    });

  beforeAll(async () => {
    const issuer = await TokenIssuer.create(ISSUER, AUDIENCE);
    for (const [tenant, principal] of [
      ['t1', 'alice'],
      ['t1', 'mallory'],
      ['t2', 'bob'],
    ])
      tokens.set(`${tenant}/${principal}`, await issuer.sign(tenant, principal));
    const env = {
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_SECURITY_GATE_FILTERS: 'token,acl',
      EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
      EVENTMESH_SECURITY_GATE_ACL_DEFAULT: 'ALLOW',
      EVENTMESH_SECURITY_GATE_ACL_REFRESH_MS: '250',
      EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
      EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
      ...issuer.env(),
      // Mode 2: a history that holds a whole case's publications, and sessions that end after 3 s idle.
      EVENTMESH_SESSIONS_HISTORY_SIZE: '1000',
      EVENTMESH_SESSIONS_IDLE_MS: '3000',
      // A young generation of 1 MiB (16 by default): what an instance holds is measured without tens of MiB of
      // garbage not yet collected around it (the first case's bound is about what is held, not what was made).
      NODE_OPTIONS: '--max-semi-space-size=1',
    };
    a = InstanceProcess.spawn({ ...env, EVENTMESH_INSTANCE_ID: `sessions-a-${topic}` });
    b = InstanceProcess.spawn({ ...env, EVENTMESH_INSTANCE_ID: `sessions-b-${topic}` });
    await Promise.all([a.ready(), b.ready()]);
  }, 120000);

  afterAll(async () => {
    for (const agent of agents) agent.kill();
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all([a, b].map((i) => i?.stop()));
  });

  it('streams 10,000 chunks from an agent on B to a slow reader on A, in order, the instances holding no more than the window', async () => {
    const CHUNK = 16 * 1024;
    const WINDOW = 256 * 1024;
    const COUNT = 10_000;
    // The agent in a process of its own (on another machine, as it would be): nothing but credit slows it.
    const agent = new SessionAgentProcess(b.url!, 'bulk', tokenOf('t1'));
    agents.push(agent);
    await agent.serving();
    const session = await client(a.url!).streaming().openSession('bulk', { windowBytes: WINDOW, waitMs: 10000 });
    expect(session.window).toBe(WINDOW);
    // A warm-up call (code paths, buffers), then each instance's memory at rest.
    let warm = 0;
    await session.call({ chunks: 300, bytes: CHUNK }).forEach(() => warm++);
    expect(warm).toBe(300);
    const memory = async (url: string) => {
      const metrics = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
      return sampleOf(metrics, 'nodejs_heap_size_used_bytes') + sampleOf(metrics, 'nodejs_external_memory_bytes');
    };
    const base = { a: await memory(a.url!), b: await memory(b.url!) };
    const peak = { ...base };
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [ma, mb] = await Promise.all([memory(a.url!), memory(b.url!)]);
        peak.a = Math.max(peak.a, ma);
        peak.b = Math.max(peak.b, mb);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    // The reader: away 16 ms after every 16 chunks (a process busy elsewhere, reading its socket late), about 1 ms
    // per chunk, as a timer rather than a spin: the host's CPU is the other lanes' too.
    let next = 0;
    let outOfOrder = 0;
    const started = Date.now();
    try {
      for await (const chunk of session.call({ chunks: COUNT, bytes: CHUNK })) {
        if (chunk.length !== CHUNK || chunk.readUInt32BE(0) !== next) outOfOrder++;
        next++;
        if (next % 16 === 0) await new Promise((r) => setTimeout(r, 16));
      }
    } finally {
      sampling = false;
      await sampler;
    }
    const seconds = (Date.now() - started) / 1000;
    expect(next).toBe(COUNT);
    expect(outOfOrder).toBe(0);
    // The agent waited for credit: the runtime counted the stalls where the agent's bytes enter it (B).
    const stalls = sampleOf(
      parsePrometheusText(await (await fetch(`${b.url}/metrics`)).text()),
      'eventmesh_session_credit_stalls_total',
    );
    expect(stalls).toBeGreaterThan(0);
    // One session: the bound is its window, plus a margin for what the processes allocate and collect meanwhile
    // (garbage not yet collected, the metrics scrapes themselves). Without credit, B forwards as fast as the agent
    // writes and A holds what the reader has not taken: tens of MiB (docs/streaming-sessions.md#flow-control).
    const MARGIN = 16 * 1024 * 1024;
    const mib = (n: number) => (n / 1024 / 1024).toFixed(1);
    console.log(
      `10,000 chunks of 16 KiB (${mib(COUNT * CHUNK)} MiB) in ${seconds.toFixed(1)} s; credit stalls ${stalls}; ` +
        `heap+external growth: A ${mib(peak.a - base.a)} MiB, B ${mib(peak.b - base.b)} MiB ` +
        `(bound: 1 x ${WINDOW / 1024} KiB + ${mib(MARGIN)} MiB)`,
    );
    expect(peak.a - base.a).toBeLessThanOrEqual(WINDOW + MARGIN);
    expect(peak.b - base.b).toBeLessThanOrEqual(WINDOW + MARGIN);
    session.close();
  }, 120000);

  it('spreads 1,000 concurrent sessions over 10 client connections across 3 agent replicas, every answer whole', async () => {
    const CHUNKS = 20;
    const servedBy = [0, 0, 0];
    const replicas = [client(a.url!), client(b.url!), client(b.url!)];
    await Promise.all(
      replicas.map((mesh, i) =>
        mesh.streaming().serve('many', async (request, { send }) => {
          servedBy[i]++;
          for (let n = 0; n < CHUNKS; n++) await send(`${request.session}#${n}`);
        }),
      ),
    );
    const callers = Array.from({ length: 10 }, (_, i) => client(i % 2 === 0 ? a.url! : b.url!));
    // Every replica known cluster-wide (its presence row written) before the opens pick among them.
    await replicasKnown('many', 3);
    const sessions = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => callers[i % 10].streaming().openSession('many', { waitMs: 10000 })),
    );
    const answers = await Promise.all(
      sessions.map(async (session) => {
        const chunks: string[] = [];
        await session.call('go').forEach((c) => chunks.push(c.toString()));
        return { session, chunks };
      }),
    );
    const whole = answers.filter(({ session, chunks }) =>
      chunks.every((c, n) => c === `${session.id}#${n}`) ? chunks.length === CHUNKS : false,
    );
    console.log(`1,000 sessions: served by the 3 replicas ${servedBy.join(' / ')}`);
    expect(whole.length).toBe(1000);
    expect(servedBy.reduce((x, y) => x + y, 0)).toBe(1000);
    // Spread: each instance picks the least-loaded replica by what it knows, exact for its own replicas and a few
    // seconds old for the other instance's, so 1,000 opened at once split unevenly (179 seen on a busy CI host);
    // every replica still takes at least a quarter of an even share.
    for (const n of servedBy) expect(n).toBeGreaterThanOrEqual(Math.floor(1000 / 3 / 4));
    for (const session of sessions) session.close();
  }, 120000);

  it("cancels a call mid-stream at the agent (its signal aborts), and a caller's disconnect cancels its sessions", async () => {
    const aborted: { session: string; reason: unknown }[] = [];
    await client(b.url!)
      .streaming()
      .serve('endless', async (request, { send, signal }) => {
        const { limit } = request.json<{ limit?: number }>();
        signal.addEventListener('abort', () => {
          aborted.push({ session: request.session, reason: signal.reason });
          cancelledAtAgent.add(request.session);
        });
        for (let n = 0; limit === undefined || n < limit; n++) {
          await send(`tick ${n}`);
          await new Promise((r) => setTimeout(r, 5));
          if (signal.aborted) return;
        }
      });
    const caller = client(a.url!);
    const session = await caller.streaming().openSession('endless', { waitMs: 10000 });
    const call = session.call({});
    let seen = 0;
    const reading = (async () => {
      for await (const chunk of call) {
        expect(chunk.toString()).toBe(`tick ${seen}`);
        if (++seen === 5) call.cancel();
      }
    })();
    await expect(reading).rejects.toBeInstanceOf(SessionCancelledError);
    const cancelled = await waitFor('the agent to see the cancel', () => aborted.find((x) => x.session === session.id));
    expect(cancelled.reason).toBeInstanceOf(SessionCancelledError);
    // The session goes on: its next call is answered whole.
    expect(await session.call({ limit: 3 }).text()).toBe('tick 0tick 1tick 2');

    const leaving = client(a.url!);
    const other = await leaving.streaming().openSession('endless', { waitMs: 10000 });
    const endless = other.call({});
    const ended = (async () => {
      for await (const _chunk of endless) if (_chunk.length > 0) await leaving.close();
    })();
    await expect(ended).rejects.toBeInstanceOf(SessionClosedError);
    const gone = await waitFor("the agent to see its caller's disconnect", () =>
      aborted.find((x) => x.session === other.id),
    );
    expect(gone.reason).toBeInstanceOf(SessionCancelledError);
    expect((gone.reason as SessionCancelledError).body.reason).toBe('disconnected');
  }, 60000);

  it('ends the sessions of an agent replica killed mid-stream with AgentGoneError; those of the other replica complete', async () => {
    const replicas = [0, 1].map(() => new SessionAgentProcess(b.url!, 'crashy', tokenOf('t1')));
    agents.push(...replicas);
    await Promise.all(replicas.map((r) => r.serving()));
    await replicasKnown('crashy', 2);
    const caller = client(a.url!).streaming();
    const sessions = await Promise.all(
      Array.from({ length: 10 }, () => caller.openSession('crashy', { waitMs: 10000 })),
    );
    const CHUNKS = 150;
    const runs = sessions.map((session) => {
      const run = { session, pid: 0, chunks: 0, error: undefined as unknown };
      const done = session
        .call({ chunks: CHUNKS, delayMs: 10 })
        .forEach((chunk) => {
          run.pid = Number(chunk.toString().split(':')[0]);
          run.chunks++;
        })
        .catch((e: unknown) => (run.error = e));
      return { run, done };
    });
    await waitFor('every session under way', () => runs.every(({ run }) => run.chunks >= 5), { timeoutMs: 20000 });
    const killed = replicas[0].pid;
    expect(runs.filter(({ run }) => run.pid === killed).length).toBeGreaterThan(0);
    expect(runs.filter(({ run }) => run.pid === replicas[1].pid).length).toBeGreaterThan(0);
    replicas[0].kill('SIGKILL');
    await Promise.all(runs.map((r) => r.done));
    for (const { run } of runs) {
      if (run.pid === killed) {
        expect(run.error).toBeInstanceOf(AgentGoneError);
        expect(run.chunks).toBeLessThan(CHUNKS);
      } else {
        expect(run.error).toBeUndefined();
        expect(run.chunks).toBe(CHUNKS);
      }
    }
  }, 60000);

  it("names agents per tenant: another tenant's agent is not found (404), and a tenant's own agent of the same name answers it", async () => {
    const other = client(a.url!, 't2', 'bob').streaming();
    const refused = await other.openSession('bulk').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AgentNotFoundError);
    expect((refused as AgentNotFoundError).status).toBe(404);
    await client(b.url!, 't2', 'bob')
      .streaming()
      .serve('bulk', async (_request, { send }) => {
        await send('tenant t2');
      });
    const own = await other.openSession('bulk', { waitMs: 10000 });
    expect(await own.call({ chunks: 1 }).text()).toBe('tenant t2');
    // t1's sessions to its own 'bulk' still reach t1's replica.
    const mine = await client(a.url!).streaming().openSession('bulk', { waitMs: 10000 });
    expect((await mine.call({ chunks: 1, bytes: 16 * 1024 }).text()).length).toBe(16 * 1024);
  }, 30000);

  it('passes every open and serve through the gate: an ACL DENY on agent.call is a 403; no replica is a 404 at once, or a wait when asked', async () => {
    const admin = await fetch(`${a.url}/admin/acl/rules`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${tokenOf('t1')}` },
      body: JSON.stringify({ subject: 'principal:mallory', action: 'agent.call', topic: 'bulk', effect: 'DENY' }),
    });
    expect(admin.status).toBe(201);
    const mallory = client(a.url!, 't1', 'mallory').streaming();
    const denied = await waitFor('the DENY rule to apply', async () => {
      const e = await mallory.openSession('bulk').then(
        (s) => (s.close(), undefined),
        (error: unknown) => error,
      );
      return e instanceof AuthError ? e : undefined;
    });
    expect(denied.status).toBe(403);
    expect(denied.code).toBe('FORBIDDEN');
    // Her other agents are hers to call.
    expect(await (await mallory.openSession('many', { waitMs: 10000 })).call('x').text()).toContain('#0');

    await expect(client(a.url!).streaming().openSession('nobody-serves-this')).rejects.toBeInstanceOf(
      AgentNotFoundError,
    );
    const waiting = client(a.url!).streaming().openSession('late', { waitMs: 20000 });
    await new Promise((r) => setTimeout(r, 300));
    await client(b.url!)
      .streaming()
      .serve('late', async (_request, { send }) => send('here'));
    expect(await (await waiting).call('x').text()).toBe('here');
  }, 60000);

  it('falls back to SSE + POST where upgrades do not get through; frames posted to another instance reach the one holding the stream', async () => {
    // A balancer with no WebSocket support that sends GETs to A and POSTs to B.
    const balancer = http.createServer((request, response) => {
      const target = new URL(request.method === 'GET' ? a.url! : b.url!);
      const upstream = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: request.url,
          method: request.method,
          headers: request.headers,
        },
        (answer) => {
          response.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(response);
        },
      );
      upstream.on('error', () => response.destroy());
      request.pipe(upstream);
    });
    balancer.on('upgrade', (_request, socket) => socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n'));
    await new Promise<void>((resolve) => balancer.listen(0, '127.0.0.1', resolve));
    try {
      const mesh = new EventMeshClient({
        url: `http://127.0.0.1:${(balancer.address() as AddressInfo).port}`,
        token: tokenOf('t1'),
      });
      clients.push(mesh);
      const streaming = mesh.streaming();
      // 300 chunks of 16 KiB through a 64 KiB window: only the credit posted to B and handed to A lets them through.
      const session = await streaming.openSession('bulk', { windowBytes: 64 * 1024, waitMs: 10000 });
      let next = 0;
      await session.call({ chunks: 300, bytes: 16 * 1024 }).forEach((chunk) => {
        expect(chunk.readUInt32BE(0)).toBe(next++);
      });
      expect(next).toBe(300);
      // A cancel posted to B reaches the agent too.
      const endless = await streaming.openSession('endless', { waitMs: 10000 });
      const call = endless.call({});
      let ticks = 0;
      await expect(
        call.forEach(() => {
          if (++ticks === 3) call.cancel();
        }),
      ).rejects.toBeInstanceOf(SessionCancelledError);
      await waitFor('the agent to see the cancel posted through B', () => cancelledAtAgent.has(endless.id));
    } finally {
      balancer.closeAllConnections();
      balancer.close();
    }
  }, 60000);

  describe('Mode 2: named sessions', () => {
    /** Reads a subscription until `count` publications came (or it ends), recording them. */
    const reader = (subscription: SessionSubscription, count: number) => {
      const got: Publication[] = [];
      const done = (async () => {
        if (count === 0) return got;
        for await (const p of subscription) if (got.push(p) >= count) break;
        return got;
      })();
      return { got, done };
    };
    /** Per publisher, the payloads in the order they came: each publisher's must be 0, 1, 2, ... */
    const inPublisherOrder = (got: Publication[], per: number) => {
      const by = new Map<string, number[]>();
      for (const p of got) by.set(p.publisher, [...(by.get(p.publisher) ?? []), Number(p.data.toString())]);
      return [...by.values()].every((xs) => xs.length === per && xs.every((x, i) => x === i)) ? by.size : 0;
    };

    it("fans 3 publishers out to 100 subscribers on two instances, in each publisher's order, with presence", async () => {
      const PER = 200;
      const subscriptions = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          client(i % 2 === 0 ? a.url! : b.url!)
            .streaming()
            .subscribeSession('room'),
        ),
      );
      const watcher = subscriptions[0];
      await waitFor('every subscriber in presence', () => watcher.subscribers().length === 100);
      const passing = await client(b.url!).streaming().subscribeSession('room');
      await waitFor('a join in presence', () => watcher.subscribers().length === 101);
      passing.unsubscribe();
      await waitFor('its leave in presence', () => watcher.subscribers().length === 100);
      // Each reader stops after the whole stream (leaving the loop unsubscribes).
      const readers = subscriptions.map((s) => reader(s, 3 * PER));
      const publishers = await Promise.all(
        [a, a, b].map((instance) => client(instance.url!).streaming().openSessionPublisher('room')),
      );
      await Promise.all(
        publishers.map(async (p) => {
          for (let n = 0; n < PER; n++) await p.publish(String(n));
        }),
      );
      const got = await Promise.all(readers.map((r) => r.done));
      expect(got.map((g) => inPublisherOrder(g, PER))).toEqual(Array(100).fill(3));
      // One ordered stream: every subscriber saw the same offsets, 1 to 600, with no gap.
      for (const g of got)
        expect(g.map((p) => p.position.offset)).toEqual(Array.from({ length: 3 * PER }, (_, i) => i + 1));
      for (const p of publishers) p.close();
      // A deadline that means hung: 60,000 deliveries to 200 connections took most of 60 s on a CI host busy with the
      // other lanes.
    }, 240000);

    it('resumes a subscriber whose connection was cut from its last position, with no gap; one too far behind is told it was not recovered', async () => {
      const proxy = new TcpProxy('127.0.0.1', Number(new URL(a.url!).port));
      await proxy.start();
      try {
        const recoveries: boolean[] = [];
        const cut = await client(`http://${proxy.address}`)
          .streaming({ reconnectMs: 100 })
          .subscribeSession('resume', { onRecovery: (recovered) => recoveries.push(recovered) });
        const publisher = await client(b.url!).streaming().openSessionPublisher('resume');
        const read = reader(cut, 300);
        for (let n = 0; n < 300; n++) {
          await publisher.publish(String(n));
          if (n === 100) {
            await waitFor('the first publications read', () => read.got.length > 50);
            proxy.cut();
            setTimeout(() => proxy.heal(), 300);
          }
          if (n % 20 === 0) await new Promise((r) => setTimeout(r, 5));
        }
        const got = await read.done;
        expect(recoveries).toEqual([true]);
        expect(got.map((p) => Number(p.data.toString()))).toEqual(Array.from({ length: 300 }, (_, i) => i));

        // The history holds 1000: 1100 more publications later, a subscriber resuming from offset 10 missed some.
        // (A publish resolves once it is sent within credit: a subscriber says when the home has numbered them all.)
        const watch = reader(await client(b.url!).streaming().subscribeSession('resume'), 1100);
        for (let n = 300; n < 1400; n++) await publisher.publish(String(n));
        expect((await watch.done).at(-1)!.position.offset).toBe(1400);
        let told: boolean | undefined;
        const late = await client(a.url!)
          .streaming()
          .subscribeSession('resume', {
            since: { epoch: got[0].position.epoch, offset: 10 },
            onRecovery: (recovered) => (told = recovered),
          });
        expect(told).toBe(false);
        expect(late.recovered).toBe(false);
        expect(late.position).toEqual({ epoch: got[0].position.epoch, offset: 1400 });
        // One resuming from 1350 gets 1351..1400 replayed, then the live ones.
        const near = await client(b.url!)
          .streaming()
          .subscribeSession('resume', { since: { epoch: got[0].position.epoch, offset: 1350 } });
        expect(near.recovered).toBe(true);
        const replayed = reader(near, 51);
        await publisher.publish('1400');
        expect((await replayed.done).map((p) => p.position.offset)).toEqual(
          Array.from({ length: 51 }, (_, i) => 1351 + i),
        );
      } finally {
        await proxy.stop();
      }
    }, 60000);

    it('drops a subscriber that falls behind its window (SlowSubscriberError), not the others, and ends an idle session (SessionEndedError)', async () => {
      // A window is never below the largest chunk (64 KiB here): the slow subscriber's is 64 KiB.
      const slow = await client(a.url!).streaming().subscribeSession('busy', { windowBytes: 4096 });
      const fast = await client(b.url!).streaming().subscribeSession('busy');
      const fastRead = reader(fast, 200);
      const publisher = await client(a.url!).streaming().openSessionPublisher('busy');
      for (let n = 0; n < 200; n++) await publisher.publish(Buffer.alloc(1024, n));
      expect((await fastRead.done).length).toBe(200);
      // The slow one read nothing: past its window it was dropped, what it had unread still readable first.
      const slowRead = reader(slow, 1000);
      await expect(slowRead.done).rejects.toBeInstanceOf(SlowSubscriberError);
      expect(slowRead.got.length).toBe(64);

      // Nothing published for 3 s: the session ends for its subscribers (and publishers).
      const stays = await client(b.url!).streaming().subscribeSession('busy');
      const idle = reader(stays, 1000);
      await expect(idle.done).rejects.toBeInstanceOf(SessionEndedError);
      // The publisher hears of it too (on its own connection: maybe a moment later), and publishes no more.
      const ended = await waitFor('the publisher to hear the end', () => publisher.error);
      expect(ended).toBeInstanceOf(SessionEndedError);
      await expect(publisher.publish('late')).rejects.toBe(ended);
    }, 30000);
  });
});
