import { networkInterfaces } from 'node:os';
import type { EventMeshConfig } from '@libs/config';
import { TargetGuard } from './target-guard';

/** The guard of a runtime whose own database is `ownHost`:5432/eventmesh, names resolved by `names` only. */
const guardOf = (ownHost: string, allowed: string[], names: Record<string, string[]> = {}) => {
  const config = {
    postgres: { host: ownHost, port: 5432, database: 'eventmesh' },
    security: { sinks: { allowedRanges: allowed } },
  } as unknown as EventMeshConfig;
  const resolved: string[] = [];
  const guard = new TargetGuard(config, async (host) => {
    resolved.push(host);
    const addresses = names[host];
    if (!addresses) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  });
  return { guard, resolved };
};

/** What the guard answers for a job's host: the address to connect to, or the refusal's reason or range. */
const verdict = async (guard: TargetGuard, host: string, database = 'eventmesh') =>
  guard.pinHost(host, 5432, database).then(
    (address) => `connects to ${address}`,
    (e: { details?: { reason?: string; range?: string } }) => `refused: ${e.details?.reason ?? e.details?.range}`,
  );

describe("TargetGuard: a job never reaches the runtime's own database, in any address form", () => {
  it('refuses every form of a loopback own database, by literal or by a name that resolves to one', async () => {
    const { guard } = guardOf('127.0.0.1', ['loopback'], {
      'mapped.example': ['::ffff:127.0.0.1'],
      'other-loopback.example': ['127.0.0.2'],
      localhost: ['127.0.0.1', '::1'],
    });
    for (const host of [
      '127.0.0.1',
      '127.1.2.3',
      '::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '0:0:0:0:0:ffff:127.0.0.1',
      'localhost',
      'mapped.example',
      'other-loopback.example',
    ])
      expect([host, await verdict(guard, host)]).toEqual([host, 'refused: own_database']);
    // Another database on the same server is the job's to use, as is the same database name on another port.
    expect(await verdict(guard, '::ffff:127.0.0.1', 'shop')).toBe('connects to ::ffff:127.0.0.1');
    expect(await guard.pinHost('127.0.0.1', 5433, 'eventmesh')).toBe('127.0.0.1');
  });

  it("refuses an address of this machine's interfaces when the own database is on loopback", async () => {
    const external = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && !i.internal && i.family === 'IPv4');
    // A host with no interface but loopback has nothing to check here; this one has one.
    expect(external).toBeDefined();
    const { guard } = guardOf('127.0.0.1', ['loopback', 'private'], { 'host.example': [external!.address] });
    expect(await verdict(guard, 'host.example')).toBe('refused: own_database');
    expect(await verdict(guard, `::ffff:${external!.address}`)).toBe('refused: own_database');
  });

  it('refuses a mapped form of an own database on a private address, and resolves the own host with the same resolver', async () => {
    const { guard, resolved } = guardOf('db.internal', ['private'], { 'db.internal': ['10.1.2.3'] });
    for (const host of ['10.1.2.3', '::ffff:10.1.2.3', '::ffff:a01:203'])
      expect([host, await verdict(guard, host)]).toEqual([host, 'refused: own_database']);
    expect(resolved).toContain('db.internal');
    // Another private address is another server.
    expect(await verdict(guard, '10.1.2.4')).toBe('connects to 10.1.2.4');
  });
});
