import type { StoredApiKey } from '@libs/storage/api-key-store';
import { newApiKeyCredential, parseApiKey } from './api-key-credential';
import { ApiKeyLookup, ApiKeyVerifier } from './api-key-verifier';

/** Models ApiKeyStore.find (a copy of the row, revoked rows included); its reads can be held open. */
class Store implements ApiKeyLookup {
  readonly rows = new Map<string, StoredApiKey>();
  finds = 0;
  gate: Promise<void> = Promise.resolve();
  async find(id: string): Promise<StoredApiKey | undefined> {
    this.finds++;
    await this.gate;
    const row = this.rows.get(id);
    return row && { ...row };
  }
}

function setup(cacheMs = 5000) {
  const store = new Store();
  const c = newApiKeyCredential();
  store.rows.set(c.id, {
    id: c.id,
    tenant: 'acme',
    principal: 'billing',
    name: 'billing',
    scopes: ['publish', 'bogus'],
    secretHash: c.secretHash,
    createdAt: new Date(),
    revokedAt: null,
    lastUsedAt: null,
  });
  let now = 1_000_000;
  const used: string[] = [];
  const verifier = new ApiKeyVerifier(
    store,
    { used: (id) => used.push(id) },
    { cacheMs, maxEntries: 10, now: () => now },
  );
  return { store, credential: parseApiKey(c.token)!, verifier, used, advance: (ms: number) => (now += ms) };
}

describe('ApiKeyVerifier', () => {
  it('reads a key once per cacheMs: a busy key costs no query, and answers without a promise', async () => {
    const { store, credential, verifier, used, advance } = setup();
    expect(await verifier.verify(credential)).toEqual({
      ok: true,
      caller: { principal: 'billing', tenant: 'acme', scopes: ['publish'], via: 'api-key' },
    });
    for (let i = 0; i < 100; i++) expect(verifier.verify(credential)).toMatchObject({ ok: true });
    expect(store.finds).toBe(1);
    expect(used).toHaveLength(101);
    advance(5000);
    await verifier.verify(credential);
    expect(store.finds).toBe(2);
  });

  it('refuses a key revoked in the store once the cached read is older than cacheMs, not before', async () => {
    const { store, credential, verifier, advance } = setup();
    expect(await verifier.verify(credential)).toMatchObject({ ok: true });
    store.rows.get(credential.id)!.revokedAt = new Date();
    advance(4999);
    expect(await verifier.verify(credential)).toMatchObject({ ok: true });
    advance(1);
    expect(await verifier.verify(credential)).toEqual({
      ok: false,
      reason: 'revoked_key',
      description: 'the API key has been revoked',
    });
  });

  it('reads every time with cacheMs 0', async () => {
    const { store, credential, verifier } = setup(0);
    await verifier.verify(credential);
    await verifier.verify(credential);
    expect(store.finds).toBe(2);
  });

  it('shares one read among the requests that wait for it', async () => {
    const { store, credential, verifier } = setup();
    let open!: () => void;
    store.gate = new Promise((r) => (open = r));
    const waiting = Array.from({ length: 20 }, () => verifier.verify(credential));
    open();
    expect((await Promise.all(waiting)).every((a) => a.ok)).toBe(true);
    expect(waiting).toHaveLength(20);
    expect(store.finds).toBe(1);
  });

  it('refuses a wrong secret like an unknown id, and notes no use', async () => {
    const { credential, verifier, used } = setup();
    expect(await verifier.verify({ id: credential.id, secret: 'A'.repeat(43) })).toMatchObject({
      ok: false,
      reason: 'unknown_key_id',
    });
    expect(await verifier.verify({ id: '0'.repeat(24), secret: credential.secret })).toMatchObject({
      ok: false,
      reason: 'unknown_key_id',
    });
    expect(used).toEqual([]);
  });

  it('throws when the store cannot be read (the gate cannot decide), and reads again next time', async () => {
    const { store, credential, verifier } = setup();
    store.gate = Promise.reject(new Error('connection refused'));
    store.gate.catch(() => undefined);
    await expect(Promise.resolve(verifier.verify(credential))).rejects.toThrow('connection refused');
    store.gate = Promise.resolve();
    expect(await verifier.verify(credential)).toMatchObject({ ok: true });
  });
});
