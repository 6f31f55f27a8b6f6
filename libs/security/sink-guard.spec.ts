import { createServer, Server } from 'node:http';
import { AddressInfo, isIP } from 'node:net';
import { buildConnector, request } from 'undici';
import type { SinkRange } from '@libs/config';
import { normalize, SinkGuard, SinkNotAllowed, SinkResolver } from './sink-guard';

/** A resolver that answers every name with `addresses`, and counts the questions. */
function fixedResolver(...addresses: string[]): SinkResolver & { calls: number } {
  const resolver = (async () => {
    resolver.calls++;
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  }) as unknown as SinkResolver & { calls: number };
  resolver.calls = 0;
  return resolver;
}

/** A connector that only counts: any call is a connection attempt. Its callback fails so nothing hangs. */
function spyConnector(): buildConnector.connector & { attempts: string[] } {
  const spy = ((options: buildConnector.Options, callback: buildConnector.Callback) => {
    spy.attempts.push(options.hostname);
    callback(new Error('spy connector: no connection made'), null);
  }) as buildConnector.connector & { attempts: string[] };
  spy.attempts = [];
  return spy;
}

describe('SinkGuard', () => {
  describe.each<[string, SinkRange[], string, string | undefined]>([
    // [case, allowed ranges, address, refused range (undefined: allowed)]
    ['IMDS', ['loopback', 'private'], '169.254.169.254', 'cloud-metadata'],
    ['AWS IMDS over IPv6', ['loopback', 'private'], 'fd00:ec2::254', 'cloud-metadata'],
    ['Alibaba metadata', ['loopback', 'private'], '100.100.100.200', 'cloud-metadata'],
    ['IPv4 link-local', ['loopback', 'private'], '169.254.10.1', 'link-local'],
    ['IPv6 link-local', ['loopback', 'private'], 'fe80::1', 'link-local'],
    ['IPv6 link-local with a zone', ['loopback', 'private'], 'fe80::1%eth0', 'link-local'],
    ['unspecified', ['loopback', 'private'], '0.0.0.0', 'unspecified'],
    ['IPv6 unspecified', ['loopback', 'private'], '::', 'unspecified'],
    ['multicast', ['loopback', 'private'], '239.1.2.3', 'multicast'],
    ['IPv6 multicast', ['loopback', 'private'], 'ff02::1', 'multicast'],
    ['broadcast', ['loopback', 'private'], '255.255.255.255', 'reserved'],
    ['10/8 by default', ['loopback'], '10.0.0.1', 'private'],
    ['172.16/12 by default', ['loopback'], '172.31.255.1', 'private'],
    ['192.168/16 by default', ['loopback'], '192.168.1.1', 'private'],
    ['100.64/10 by default', ['loopback'], '100.64.0.1', 'private'],
    ['fc00::/7 by default', ['loopback'], 'fd12:3456::1', 'private'],
    ['10/8 when private is allowed', ['private'], '10.0.0.1', undefined],
    ['loopback when allowed (the default)', ['loopback'], '127.0.0.1', undefined],
    ['127/8 when allowed', ['loopback'], '127.8.9.10', undefined],
    ['::1 when allowed', ['loopback'], '::1', undefined],
    ['loopback with none allowed', [], '127.0.0.1', 'loopback'],
    ['::1 with none allowed', [], '::1', 'loopback'],
    ['IPv4-mapped loopback, none allowed', [], '::ffff:127.0.0.1', 'loopback'],
    ['IPv4-mapped metadata', ['loopback', 'private'], '::ffff:169.254.169.254', 'cloud-metadata'],
    ['IPv4-mapped metadata in hex', ['loopback', 'private'], '::ffff:a9fe:a9fe', 'cloud-metadata'],
    ['NAT64 of metadata', ['loopback', 'private'], '64:ff9b::169.254.169.254', 'cloud-metadata'],
    ['6to4 of a private address', ['loopback'], '2002:0a00:0001::1', 'private'],
    ['IPv4-mapped private by default', ['loopback'], '::ffff:10.0.0.1', 'private'],
    ['a public IPv4 address', [], '93.184.215.14', undefined],
    ['a public IPv6 address', [], '2606:2800:21f:cb07:6820:80da:af6b:8b2c', undefined],
    ['172.32/16 is public', [], '172.32.0.1', undefined],
  ])('%s', (_, allowed, address, refused) => {
    it(refused ? `refuses ${address} (${refused})` : `allows ${address}`, async () => {
      const guard = new SinkGuard(allowed, fixedResolver(address));
      expect(guard.refusedRangeOf(address)).toBe(refused);
      const spy = spyConnector();
      const agent = guard.agent({}, spy);
      const sending = request('http://sink.example.test/hook', { method: 'POST', body: 'x', dispatcher: agent });
      if (refused) {
        await expect(guard.check('http://sink.example.test/hook')).rejects.toThrow(SinkNotAllowed);
        await expect(sending).rejects.toThrow(`resolves to a ${refused} address`);
        // The refusal came before any connection attempt.
        expect(spy.attempts).toEqual([]);
      } else {
        await expect(guard.check('http://sink.example.test/hook')).resolves.toBeUndefined();
        await expect(sending).rejects.toThrow('spy connector');
        // The connection goes to the checked address, never to the name again.
        expect(spy.attempts).toEqual([normalize(address)!.type === 'ipv6' ? address.replace(/%.*$/, '') : address]);
      }
      await agent.close();
    });
  });

  it('refuses a sink when ANY address of its host is refused, before connecting', async () => {
    const guard = new SinkGuard(['loopback'], fixedResolver('127.0.0.1', '10.0.0.1'));
    const spy = spyConnector();
    await expect(guard.check('http://mixed.example.test/')).rejects.toMatchObject({
      code: 'SINK_NOT_ALLOWED',
      details: { field: 'sink', range: 'private' },
    });
    await expect(request('http://mixed.example.test/', { dispatcher: guard.agent({}, spy) })).rejects.toThrow(
      SinkNotAllowed,
    );
    expect(spy.attempts).toEqual([]);
  });

  it('refuses metadata names without resolving them, and IP literals without a resolver', async () => {
    const resolver = fixedResolver('93.184.215.14');
    const guard = new SinkGuard(['loopback', 'private'], resolver);
    await expect(guard.check('http://metadata.google.internal/computeMetadata/v1/')).rejects.toThrow('cloud-metadata');
    await expect(guard.check('http://METADATA.GOOGLE.INTERNAL./')).rejects.toThrow('cloud-metadata');
    await expect(guard.check('http://169.254.169.254/latest/meta-data/')).rejects.toThrow('cloud-metadata');
    await expect(guard.check('http://[::ffff:169.254.169.254]/')).rejects.toThrow('cloud-metadata');
    await expect(guard.check('http://[fd00:ec2::254]/')).rejects.toThrow('cloud-metadata');
    expect(resolver.calls).toBe(0);
    const spy = spyConnector();
    await expect(
      request('http://169.254.169.254/latest/meta-data/', { dispatcher: guard.agent({}, spy) }),
    ).rejects.toThrow('cloud-metadata');
    expect(spy.attempts).toEqual([]);
  });

  it('refuses a URL with a user name or password 400 (reason userinfo) before resolving it, never repeating it', async () => {
    const resolver = fixedResolver('93.184.216.34');
    const guard = new SinkGuard([], resolver);
    for (const sink of [
      'http://user:s3cr3t@hooks.example.test/x',
      'https://user@hooks.example.test/x',
      'http://:s3cr3t@hooks.example.test/x',
    ]) {
      const refusal = await guard.check(sink).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(refusal).toBeInstanceOf(SinkNotAllowed);
      expect(refusal).toMatchObject({ code: 'SINK_NOT_ALLOWED', details: { field: 'sink', reason: 'userinfo' } });
      expect(JSON.stringify([(refusal as Error).message, (refusal as SinkNotAllowed).details])).not.toMatch(
        /s3cr3t|hooks/,
      );
    }
    expect(resolver.calls).toBe(0);
    await expect(guard.check('http://hooks.example.test/x?user=a')).resolves.toBeUndefined();
  });

  it("refuses this runtime's own publish routes (a name that resolves to loopback, at its port), not its other paths nor other ports", async () => {
    const guard = new SinkGuard(['loopback'], fixedResolver('127.0.0.1'), {
      port: 8080,
      advertisedUrl: 'https://mesh.example.test',
    });
    for (const sink of [
      'http://mesh.internal.test:8080/events/publish',
      'http://mesh.internal.test:8080/events/publish?topic=orders',
      'http://127.0.0.1:8080/events/request',
      'http://[::1]:8080/events/reply',
      'https://mesh.example.test/events/publish',
    ]) {
      await expect(guard.check(sink)).rejects.toMatchObject({
        code: 'SINK_NOT_ALLOWED',
        details: { field: 'sink', reason: 'own_publish_route' },
      });
    }
    for (const sink of [
      'http://mesh.internal.test:8080/hook',
      'http://mesh.internal.test:8081/events/publish',
      'http://mesh.internal.test/events/publish',
    ]) {
      await expect(guard.check(sink)).resolves.toBeUndefined();
    }
    // The port a gateway picked at listen (EVENTMESH_HTTP_PORT=0).
    guard.listeningOn(41234);
    await expect(guard.check('http://mesh.internal.test:41234/events/publish')).rejects.toMatchObject({
      details: { reason: 'own_publish_route' },
    });
  });

  it('refuses what is not an http(s) URL, and a host that does not resolve', async () => {
    const failing: SinkResolver = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
    };
    const guard = new SinkGuard(['loopback'], failing);
    await expect(guard.check('ftp://127.0.0.1/')).rejects.toThrow('only http and https');
    await expect(guard.check('not a url')).rejects.toThrow('not a URL');
    await expect(guard.check('http://nowhere.example.test/')).rejects.toThrow('does not resolve (ENOTFOUND)');
    await expect(new SinkGuard(['loopback'], fixedResolver()).check('http://empty.example.test/')).rejects.toThrow(
      'does not resolve',
    );
  });

  describe('against a loopback sink', () => {
    let server: Server;
    let port: number;
    let hits = 0;
    beforeAll(async () => {
      server = createServer((_, res) => {
        hits++;
        res.writeHead(204).end();
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      port = (server.address() as AddressInfo).port;
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });

    it('connects to the address it checked: a name that rebinds to metadata after the check reaches nothing', async () => {
      // The first answer (at create) is loopback; every later one is the metadata service (DNS rebinding).
      let answers = 0;
      const rebinding: SinkResolver = async () => [
        { address: answers++ === 0 ? '127.0.0.1' : '169.254.169.254', family: 4 },
      ];
      const guard = new SinkGuard(['loopback'], rebinding);
      const sink = `http://rebind.example.test:${port}/hook`;
      await guard.check(sink);
      const spy = spyConnector();
      await expect(request(sink, { method: 'POST', body: 'x', dispatcher: guard.agent({}, spy) })).rejects.toThrow(
        'cloud-metadata',
      );
      expect(spy.attempts).toEqual([]);
      expect(hits).toBe(0);
    });

    it('delivers to an allowed name through the real connector, to the pinned address', async () => {
      const guard = new SinkGuard(['loopback'], fixedResolver('127.0.0.1'));
      // undici's connector, behind a check that it is only ever handed an address: a name would go to the
      // system resolver (never in a test).
      const real = buildConnector({});
      const handed: string[] = [];
      const agent = guard.agent({}, (options, callback) => {
        handed.push(options.hostname);
        if (!isIP(options.hostname))
          return callback(new Error(`handed a name (${options.hostname}), not an address`), null);
        return real(options, callback);
      });
      const response = await request(`http://sink.example.test:${port}/hook`, {
        method: 'POST',
        body: 'x',
        dispatcher: agent,
      });
      await response.body.dump();
      expect(response.statusCode).toBe(204);
      expect(hits).toBe(1);
      expect(handed).toEqual(['127.0.0.1']);
      await agent.close();
    });
  });
});
