import { randomUUID } from 'node:crypto';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { decodeSessionFrame, encodeSessionFrame } from '@libs/frame';
import type { Caller } from '@libs/security';
import type { ReplicaReader } from './agent-presence';
import { LocalReplicas } from './agent-replicas';
import { CallSessions } from './call-sessions';
import { SessionConnection, type SessionTransport } from './session-connection';
import type { SessionLinks } from './session-links';
import { SessionQuotas } from './session-quotas';

const CONFIG = {
  windowBytes: 256 * 1024,
  maxWindowBytes: 4 * 1024 * 1024,
  maxChunkBytes: 64 * 1024,
  maxRequestBytes: 1024 * 1024,
  openTimeoutMs: 10_000,
  maxWaitMs: 60_000,
  heartbeatMs: 5000,
  maxPerTenant: 10,
  maxAgentsPerTenant: 10,
  maxBytesInFlightPerTenant: 1024 * 1024 * 1024,
  historySize: 100,
  subscriberWindowBytes: 1024 * 1024,
  idleMs: 300_000,
};

const CALLER = { tenant: 't1', principal: 'alice' } as Caller;

/** A client connection whose frames are kept, as kinds. */
function connection(): { connection: SessionConnection; kinds: string[] } {
  const kinds: string[] = [];
  const transport: SessionTransport = {
    kind: 'websocket',
    open: true,
    buffered: 0,
    send: (raw: Buffer) => kinds.push(decodeSessionFrame(raw).kind),
    close: () => undefined,
  };
  return { connection: new SessionConnection(transport, { caller: CALLER, headers: {}, remoteAddress: '' }), kinds };
}

/** CallSessions whose gate answers when the test says (`admitted`), with no replica anywhere. */
function calls(): { calls: CallSessions; quotas: SessionQuotas; admitted(e?: Error): Promise<void> } {
  const quotas = new SessionQuotas(CONFIG);
  let answer: ((e?: Error) => void) | undefined;
  const gate = new Promise<void>((resolve, reject) => (answer = (e) => (e ? reject(e) : resolve())));
  gate.catch(() => undefined);
  const calls = new CallSessions({
    config: CONFIG,
    replicas: new LocalReplicas(),
    reader: { replicasOf: () => Promise.resolve([]), forget: () => undefined } as unknown as ReplicaReader,
    links: { available: () => true } as unknown as SessionLinks,
    self: 'i1/1',
    quotas,
    admit: () => gate.then(() => CALLER),
  });
  return {
    calls,
    quotas,
    admitted: async (e) => {
      answer!(e);
      await new Promise((r) => setImmediate(r));
    },
  };
}

const open = (id: string) => decodeSessionFrame(encodeSessionFrame({ kind: 'open', id }));

describe('CallSessions: an open is admitted before anything is allocated for it', () => {
  it('holds no session and charges no quota while the gate decides; a refusal leaves nothing', async () => {
    const { calls: sessions, quotas, admitted } = calls();
    const { connection: c, kinds } = connection();
    void sessions.open(c, open(`llm:${randomUUID()}`));
    expect(sessions.stats().callers).toBe(0);
    await admitted(new EventMeshError(ErrorCode.Forbidden, 'denied'));
    expect(kinds).toEqual(['error']);
    expect(sessions.stats().callers).toBe(0);
    expect(quotas.local()).toEqual([]);
  });

  it('refuses a second open of the same id while the first is admitted, and hears a close meanwhile: nothing opens', async () => {
    const { calls: sessions, quotas, admitted } = calls();
    const { connection: c, kinds } = connection();
    const id = `llm:${randomUUID()}`;
    void sessions.open(c, open(id));
    void sessions.open(c, open(id));
    expect(kinds).toEqual(['error']);
    expect(sessions.isCaller(c, id)).toBe(true);
    sessions.fromCaller(c, decodeSessionFrame(encodeSessionFrame({ kind: 'close', id })), Buffer.alloc(0));
    await admitted();
    expect(kinds).toEqual(['error']);
    expect(sessions.stats().callers).toBe(0);
    expect(quotas.local()).toEqual([]);
  });
});
