import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setImmediate as turn } from 'node:timers/promises';
import { exportJWK, generateKeyPair, JWK, KeyLike, SignJWT } from 'jose';
import {
  AgentGoneError,
  AgentNotFoundError,
  AuthError,
  EventMeshClient,
  SessionCancelledError,
  SessionClosedError,
} from '@eventmesh/client';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { parsePrometheusText, sampleOf } from '../support/prometheus-text';
import { SessionAgentProcess } from '../support/session-agent-process';
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
  let privateKey: KeyLike;
  const tokens = new Map<string, string>();
  const clients: EventMeshClient[] = [];
  const agents: SessionAgentProcess[] = [];

  const tokenOf = (tenant: string, principal = 'alice') => tokens.get(`${tenant}/${principal}`)!;
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
    const pair = await generateKeyPair('ES256');
    privateKey = pair.privateKey;
    const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: 's-1', alg: 'ES256', use: 'sig' };
    const keysFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'eventmesh-sessions-')), 'jwks.json');
    writeFileSync(keysFile, JSON.stringify({ keys: [jwk] }));
    for (const [tenant, principal] of [
      ['t1', 'alice'],
      ['t1', 'mallory'],
      ['t2', 'bob'],
    ])
      tokens.set(
        `${tenant}/${principal}`,
        await new SignJWT({ tenant, scope: 'publish subscribe admin' })
          .setProtectedHeader({ alg: 'ES256', kid: 's-1', typ: 'at+jwt' })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setSubject(principal)
          .setIssuedAt()
          .setExpirationTime('30m')
          .sign(privateKey),
      );
    const env = {
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_SECURITY_GATE_FILTERS: 'token,acl',
      EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
      EVENTMESH_SECURITY_GATE_ACL_DEFAULT: 'ALLOW',
      EVENTMESH_SECURITY_GATE_ACL_REFRESH_MS: '250',
      EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
      EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
      EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: keysFile,
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: ISSUER,
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: AUDIENCE,
      EVENTMESH_SESSIONS_HEARTBEAT_MS: '1000',
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
    await client(b.url!)
      .streaming()
      .serve('bulk', async (request, { send }) => {
        const { count } = request.json<{ count: number }>();
        for (let n = 0; n < count; n++) {
          const chunk = Buffer.alloc(CHUNK);
          chunk.writeUInt32BE(n, 0);
          await send(chunk);
        }
      });
    const session = await client(a.url!).streaming().openSession('bulk', { windowBytes: WINDOW, waitMs: 10000 });
    expect(session.window).toBe(WINDOW);
    // A warm-up call (code paths, buffers), then each instance's memory at rest.
    let warm = 0;
    await session.call({ count: 300 }).forEach(() => warm++);
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
    // The reader: 0.3 ms of work per chunk (its process busy, it reads its socket late), a turn every 16 chunks.
    let next = 0;
    let outOfOrder = 0;
    const started = Date.now();
    try {
      for await (const chunk of session.call({ count: COUNT })) {
        if (chunk.length !== CHUNK || chunk.readUInt32BE(0) !== next) outOfOrder++;
        next++;
        const until = performance.now() + 0.3;
        while (performance.now() < until);
        if (next % 16 === 0) await turn();
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
    for (const n of servedBy) expect(n).toBeGreaterThanOrEqual(250);
    for (const session of sessions) session.close();
  }, 120000);

  it("cancels a call mid-stream at the agent (its signal aborts), and a caller's disconnect cancels its sessions", async () => {
    const aborted: { session: string; reason: unknown }[] = [];
    await client(b.url!)
      .streaming()
      .serve('endless', async (request, { send, signal }) => {
        const { limit } = request.json<{ limit?: number }>();
        signal.addEventListener('abort', () => aborted.push({ session: request.session, reason: signal.reason }));
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
    expect(await own.call({ count: 1 }).text()).toBe('tenant t2');
    // t1's sessions to its own 'bulk' still reach t1's replica.
    const mine = await client(a.url!).streaming().openSession('bulk', { waitMs: 10000 });
    expect((await mine.call({ count: 1 }).text()).length).toBe(16 * 1024);
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
});
