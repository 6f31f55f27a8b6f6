import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { EventMeshClient, EventMeshError, UnavailableError } from '@eventmesh/client';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { resetOwnership, temporalClient } from '../support/temporal';
import { TokenIssuer } from '../support/token-issuer';
import { waitFor } from '../support/wait-for';

/** A tenant's figures in `GET /admin/sessions`: its quota usage across the runtime as the answering process counts it. */
interface UsageView {
  usage: { tenant: string; sessions: number; agents: number; bytes: number }[];
}

/**
 * Streaming sessions on two PARTITION_OWNED_PULL instances (docs/streaming-sessions.md#across-instances: sessions
 * never touch Kafka or Temporal, so the topology makes no difference; streaming-sessions.e2e-spec.ts runs the rest on
 * LOCAL_STICKY_PULL), and the tenant quotas held across the instances (#security): a tenant at its cap through A is
 * refused through B, another tenant is not. The cases run in order on one pair of instances.
 */
describe('streaming sessions across PARTITION_OWNED_PULL instances, quotas per tenant across the runtime', () => {
  const topic = uniqueTopic('sessions-owned');
  const run = randomUUID().slice(0, 6);
  const MAX_SESSIONS = 3;
  let a: InstanceProcess;
  let b: InstanceProcess;
  let temporal: { client: Client; close(): Promise<void> };
  const tokens = new Map<string, string>();
  const clients: EventMeshClient[] = [];
  const client = (url: string, tenant: string) => {
    const mesh = new EventMeshClient({ url, token: tokens.get(tenant)! });
    clients.push(mesh);
    return mesh;
  };
  const words = async (mesh: EventMeshClient, agent: string, text: string) => {
    const session = await mesh.streaming().openSession(agent, { waitMs: 10000 });
    const chunks: string[] = [];
    await session.call(text).forEach((chunk) => chunks.push(chunk.toString()));
    await session.close();
    return chunks;
  };
  /** Waits until `via` counts `tenant`'s usage across the runtime as `expected` (the other's rows read). */
  const counted = (via: InstanceProcess, tenant: string, expected: { sessions: number; agents: number }) =>
    waitFor(`${via.url} to count ${tenant}'s ${JSON.stringify(expected)}`, async () => {
      const view = (await (
        await fetch(`${via.url}/admin/sessions`, { headers: { authorization: `Bearer ${tokens.get(tenant)}` } })
      ).json()) as UsageView;
      const mine = view.usage.find((u) => u.tenant === tenant) ?? { sessions: 0, agents: 0 };
      return mine.sessions === expected.sessions && mine.agents === expected.agents;
    });
  const refusal = (e: unknown) => {
    expect(e).toBeInstanceOf(UnavailableError);
    const error = e as EventMeshError;
    return { code: error.code, status: error.status, quota: error.body?.quota };
  };

  beforeAll(async () => {
    temporal = await temporalClient();
    await resetOwnership(temporal.client);
    const issuer = await TokenIssuer.create('https://issuer.sessions-owned.test', 'eventmesh-sessions-owned');
    for (const tenant of ['q1', 'q2', 'default']) tokens.set(tenant, await issuer.sign(tenant, 'alice'));
    const env = {
      ...issuer.env(),
      EVENTMESH_DELIVERY_TOPOLOGY: 'PARTITION_OWNED_PULL',
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_SECURITY_GATE_FILTERS: 'token',
      EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
      EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
      EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
      EVENTMESH_SESSIONS_MAX_PER_TENANT: String(MAX_SESSIONS),
      EVENTMESH_SESSIONS_MAX_AGENTS_PER_TENANT: '1',
    };
    a = InstanceProcess.spawn({ ...env, EVENTMESH_INSTANCE_ID: `so-a-${run}` });
    b = InstanceProcess.spawn({ ...env, EVENTMESH_INSTANCE_ID: `so-b-${run}` });
    await Promise.all([a.ready(), b.ready()]);
  }, 120000);

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all([a, b].map((i) => i?.stop()));
    await resetOwnership(temporal.client);
    await temporal.close();
  });

  it('streams a call from an agent on A to a client on B, and from an agent on B to a client on A', async () => {
    const shout = async (request: { text(): string }, { send }: { send(chunk: string): Promise<void> }) => {
      for (const word of request.text().split(' ')) await send(word.toUpperCase());
    };
    await client(a.url!, 'q1').streaming().serve('shout', shout);
    await client(b.url!, 'q2').streaming().serve('shout', shout);
    expect(await words(client(b.url!, 'q1'), 'shout', 'from a to b')).toEqual(['FROM', 'A', 'TO', 'B']);
    expect(await words(client(a.url!, 'q2'), 'shout', 'from b to a')).toEqual(['FROM', 'B', 'TO', 'A']);
  });

  it('refuses a tenant at its session cap through A on B too (429 QUOTA_EXCEEDED), not another tenant; a close gives the place back', async () => {
    // q1 serves 'shout' on A (1 agent, its cap): its sessions, opened through A, fill its cap of 3.
    const viaA = client(a.url!, 'q1').streaming();
    const held = [];
    for (let i = 0; i < MAX_SESSIONS; i++) held.push(await viaA.openSession('shout'));
    await counted(b, 'q1', { sessions: MAX_SESSIONS, agents: 1 });

    const viaB = client(b.url!, 'q1').streaming();
    expect(refusal(await viaB.openSession('shout').catch((e: unknown) => e))).toEqual({
      code: 'QUOTA_EXCEEDED',
      status: 429,
      quota: 'sessions',
    });
    // Its agents cap (1, served on A) holds on B as well.
    expect(refusal(await viaB.serve('other', async () => undefined).catch((e: unknown) => e))).toEqual({
      code: 'QUOTA_EXCEEDED',
      status: 429,
      quota: 'session_agents',
    });
    // Another tenant is not held by q1's usage.
    expect(await words(client(b.url!, 'q2'), 'shout', 'q2 goes on')).toEqual(['Q2', 'GOES', 'ON']);
    // An admin of the operator tenant sees every tenant's usage and agents; another tenant's admin only its own.
    const view = async (tenant: string) =>
      fetch(`${b.url}/admin/sessions?tenant=*`, { headers: { authorization: `Bearer ${tokens.get(tenant)}` } });
    const all = (await (await view('default')).json()) as UsageView & { agents: { tenant: string }[] };
    expect(all.usage.find((u) => u.tenant === 'q1')).toMatchObject({ sessions: MAX_SESSIONS, agents: 1 });
    expect(all.agents.map((x) => x.tenant)).toEqual(expect.arrayContaining(['q1', 'q2']));
    const forbidden = await view('q1');
    expect(forbidden.status).toBe(403);
    expect(await forbidden.json()).toMatchObject({ code: 'FORBIDDEN' });

    await held.pop()!.close();
    await counted(b, 'q1', { sessions: MAX_SESSIONS - 1, agents: 1 });
    const again = await viaB.openSession('shout');
    const chunks: string[] = [];
    await again.call('room again').forEach((chunk) => chunks.push(chunk.toString()));
    expect(chunks).toEqual(['ROOM', 'AGAIN']);
  });
});
